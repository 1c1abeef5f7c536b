package idemamqp_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemamqp"
	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// A child consumer, the test binary run again with IDEMAMQP_CHILD set,
// takes one delivery of IDEMAMQP_QUEUE and stops where the parent
// SIGKILLs it: in the handler, its effect written but not committed, or
// after the commit and before the ack.
const (
	childEnv    = "IDEMAMQP_CHILD"
	queueEnv    = "IDEMAMQP_QUEUE"
	inHandler   = "in-handler"
	afterCommit = "after-commit"
)

func TestMain(m *testing.M) {
	if stop := os.Getenv(childEnv); stop != "" {
		child(stop, os.Getenv(queueEnv))
		return
	}
	os.Exit(m.Run())
}

// child consumes one delivery of queue and stops (proctest.StopHere) where
// stop says.
func child(stop, queue string) {
	fail := func(err error) { fmt.Fprintln(os.Stderr, "child:", err); os.Exit(2) }
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fail(err)
	}
	var runs atomic.Int32
	h := handler(pool, &runs)
	if stop == inHandler {
		effect := h
		h = func(ctx context.Context, m *consumer.Message) idem.Response {
			effect(ctx, m)
			proctest.StopHere()
			return idem.Response{}
		}
	}
	c, err := newConsumer(pool, h)
	if err != nil {
		fail(err)
	}
	conn, err := amqp.Dial(brokerURL())
	if err != nil {
		fail(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		fail(err)
	}
	if err := ch.Qos(1, 0, false); err != nil {
		fail(err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		fail(err)
	}
	select {
	case d := <-deliveries:
		if dec := c.Process(ctx, idemamqp.Message(d)); dec.Action != consumer.Ack {
			fail(fmt.Errorf("%v: %v", dec.Action, dec.Result.Err))
		}
	case <-time.After(time.Minute):
		fail(fmt.Errorf("no delivery on %s", queue))
	}
	proctest.StopHere()
}

func TestConsumerKilled(t *testing.T) {
	t.Parallel()
	// Nothing committed: the survivor runs the handler.
	t.Run(inHandler, func(t *testing.T) { consumerKilled(t, inHandler, false) })
	// Committed, not acknowledged: the survivor answers from the key's record.
	t.Run(afterCommit, func(t *testing.T) { consumerKilled(t, afterCommit, true) })
}

// consumerKilled has a child consumer killed at stop, then a survivor
// take the delivery the broker requeued.
func consumerKilled(t *testing.T, stop string, replayed bool) {
	t.Parallel()
	conn := dial(t)
	pool, dbURL := newPool(t)
	commands, results, dead, ch := queues(t, conn)
	publish(t, ch, commands, "order-1", "a")
	proctest.KillAtStop(t, childEnv+"="+stop, queueEnv+"="+commands, "AMQP_URL="+brokerURL(), "DATABASE_URL="+dbURL)

	var runs atomic.Int32
	stopSurvivor := run(t, pool, handler(pool, &runs), commands, results, dead)
	a := next(t, ch, results)
	require.Equal(t, http.StatusCreated, status(a))
	require.Equal(t, replayed, a.Headers[consumer.HeaderReplayed] == "true")
	require.Equal(t, 1, count(t, pool, "order-1"))
	stopSurvivor()
	settled(t, ch, commands)
	settled(t, ch, dead) // nothing dead-lettered
}
