package idemnats_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemnats"
	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// A child consumer, the test binary run again with IDEMNATS_CHILD set,
// takes one message and stops where the parent SIGKILLs it: in the
// handler (before its commit), or after the commit and before the ack.
const (
	childEnv    = "IDEMNATS_CHILD"
	inHandler   = "in-handler"
	afterCommit = "after-commit"
)

func TestMain(m *testing.M) {
	if stop := os.Getenv(childEnv); stop != "" {
		child(stop)
		return
	}
	os.Exit(m.Run())
}

// child consumes one message and stops (proctest.StopHere) where stop says.
func child(stop string) {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fail(err)
	}
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fail(err)
	}
	cons, err := js.Consumer(ctx, streamName, durable)
	if err != nil {
		fail(err)
	}
	var before func()
	if stop == inHandler {
		before = proctest.StopHere
	}
	c := newConsumer(&testing.T{}, pool, handler(pool, before))
	msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
	if err != nil {
		fail(err)
	}
	if d := c.Process(ctx, idemnats.Message(msg)); d.Action != consumer.Ack {
		fail(fmt.Errorf("child: %v: %v", d.Action, d.Result.Err))
	}
	proctest.StopHere()
}

func TestConsumerKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stop     string
		replayed bool // the survivor answers from the key's record
	}{{inHandler, false}, {afterCommit, true}} {
		t.Run(tc.stop, func(t *testing.T) {
			t.Parallel()
			pool, dbURL := newPool(t)
			s := startBroker(t, t.TempDir(), 0)
			nc, js, cons := connect(t, s.ClientURL(), 2*time.Second)
			sub, err := nc.SubscribeSync(results)
			require.NoError(t, err)
			publish(t, js, "cmds.pay", "order-1", "a")

			proctest.KillAtStop(t, childEnv+"="+tc.stop, "NATS_URL="+s.ClientURL(), "DATABASE_URL="+dbURL)

			// JetStream redelivers after AckWait; a survivor takes it.
			run(t, newConsumer(t, pool, handler(pool, nil)), js, cons, 1)
			a := next(t, sub)
			require.Equal(t, http.StatusCreated, a.status)
			require.Equal(t, tc.replayed, a.replayed)
			require.Equal(t, 1, countEffects(t, pool, "order-1"))
		})
	}
}
