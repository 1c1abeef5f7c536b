package idemamqp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemamqp"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// DefaultURL is the RabbitMQ the tests use when AMQP_URL is unset.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// brokerURL is AMQP_URL, or DefaultURL.
func brokerURL() string {
	if url := os.Getenv("AMQP_URL"); url != "" {
		return url
	}
	return DefaultURL
}

func dial(t *testing.T) *amqp.Connection {
	t.Helper()
	url := brokerURL()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at %s: %v\n"+
			"Set AMQP_URL to a RabbitMQ you may declare queues in, or install and start one "+
			"(Debian/Ubuntu: apt-get install rabbitmq-server && service rabbitmq-server start).", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// queues declares a quorum queue of commands and queues for the answers
// and the dead letters, deleted when the test ends, and returns them with
// a channel in confirm mode.
func queues(t *testing.T, conn *amqp.Connection) (commands, results, dead string, ch *amqp.Channel) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	var b [6]byte
	_, _ = rand.Read(b[:])
	base := "idemamqp-test-" + hex.EncodeToString(b[:])
	commands, results, dead = base+".commands", base+".results", base+".dead"
	for _, q := range []string{commands, results, dead} {
		_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		t.Cleanup(func() { // on a connection of its own: the test's may be lost
			conn, err := amqp.Dial(brokerURL())
			if err != nil {
				return
			}
			defer conn.Close()
			if c, err := conn.Channel(); err == nil {
				_, _ = c.QueueDelete(q, false, false, false)
			}
		})
	}
	return commands, results, dead, ch
}

// newPool returns a pool on a migrated schema of its own with the effects
// table, and the schema's URL for a child process.
func newPool(t *testing.T) (*pgxpool.Pool, string) {
	pool, url := pgtest.PoolURL(t, 16)
	_, err := pgstore.Migrate(context.Background(), pool)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), "CREATE TABLE effects (key text NOT NULL)")
	require.NoError(t, err)
	return pool, url
}

// handler records an effect and answers 201; a body "poison" is a final
// failure (400), "flaky" fails retriably (503) on its first two deliveries.
func handler(pool *pgxpool.Pool, runs *atomic.Int32) consumer.HandlerFunc {
	return func(ctx context.Context, m *consumer.Message) idem.Response {
		n := runs.Add(1)
		switch string(m.Body) {
		case "poison":
			return idem.Response{StatusCode: http.StatusBadRequest}
		case "flaky":
			if m.Deliveries < 3 {
				return idem.Response{StatusCode: http.StatusServiceUnavailable}
			}
		}
		if _, err := pgstore.DB(ctx, pool).Exec(ctx, "INSERT INTO effects VALUES ($1)", idem.KeyFromContext(ctx)); err != nil {
			return idem.Response{StatusCode: http.StatusInternalServerError}
		}
		return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"run":%d}`, n)}
	}
}

// newConsumer is the consumer under test, on a migrated store in pool.
func newConsumer(pool *pgxpool.Pool, h consumer.HandlerFunc) (*consumer.Consumer, error) {
	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		return nil, err
	}
	return consumer.New(mw, h, consumer.Config{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
}

// run runs an idemamqp.Consumer of commands on a connection of its own,
// dialing again when it is lost, until stop or the end of the test.
func run(t *testing.T, pool *pgxpool.Pool, h consumer.HandlerFunc, commands, results, dead string) (stop func()) {
	t.Helper()
	c, err := newConsumer(pool, h)
	require.NoError(t, err)
	ac, err := idemamqp.New(c, dial(t), idemamqp.Config{
		ResultQueue: results, DeadLetterQueue: dead, Workers: 4, RedialDelay: 50 * time.Millisecond,
		Redial: func(context.Context) (*amqp.Connection, error) { return amqp.Dial(brokerURL()) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ac.Run(ctx, commands) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
			_ = ac.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// publish publishes a command with key, and waits for the broker's confirm.
func publish(t *testing.T, ch *amqp.Channel, queue, key, body string) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false, amqp.Publishing{
		Headers: amqp.Table{"Idempotency-Key": key}, Body: []byte(body), DeliveryMode: amqp.Persistent,
	})
	require.NoError(t, err)
	require.True(t, dc.Wait(), "the broker refused the command")
}

// next waits for the next message on queue.
func next(t *testing.T, ch *amqp.Channel, queue string) amqp.Delivery {
	t.Helper()
	var d amqp.Delivery
	require.Eventually(t, func() bool {
		var ok bool
		var err error
		d, ok, err = ch.Get(queue, true)
		require.NoError(t, err)
		return ok
	}, time.Minute, 10*time.Millisecond, "nothing arrived on %s", queue)
	return d
}

func status(d amqp.Delivery) int {
	s, _ := d.Headers[consumer.HeaderStatus].(string)
	n, _ := strconv.Atoi(s)
	return n
}

// settled checks, once the queue's consumers are gone (their unacknowledged
// deliveries back in the queue), that no delivery is left: every one was
// acknowledged.
func settled(t *testing.T, ch *amqp.Channel, queue string) {
	t.Helper()
	var q amqp.Queue
	require.Eventually(t, func() bool {
		var err error
		q, err = ch.QueueDeclarePassive(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		return q.Consumers == 0
	}, time.Minute, 10*time.Millisecond, "%s still has consumers", queue)
	require.Equal(t, 0, q.Messages, "deliveries left on %s", queue)
}

func count(t *testing.T, pool *pgxpool.Pool, key string) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM effects WHERE key = $1", key).Scan(&n))
	return n
}

func TestDuplicatesPoisonAndRetries(t *testing.T) {
	t.Parallel()
	conn := dial(t)
	pool, _ := newPool(t)
	commands, results, dead, ch := queues(t, conn)
	var runs atomic.Int32
	run(t, pool, handler(pool, &runs), commands, results, dead)

	publish(t, ch, commands, "order-1", "a")
	first := next(t, ch, results)
	publish(t, ch, commands, "order-1", "a")
	again := next(t, ch, results)
	require.Equal(t, http.StatusCreated, status(first))
	require.Equal(t, "true", again.Headers[consumer.HeaderReplayed])
	require.Equal(t, string(first.Body), string(again.Body))
	require.Equal(t, 1, count(t, pool, "order-1"))

	publish(t, ch, commands, "order-1", "b")
	require.Equal(t, http.StatusUnprocessableEntity, status(next(t, ch, results)))
	require.Equal(t, "b", string(next(t, ch, dead).Body))

	publish(t, ch, commands, "bad-1", "poison")
	require.Equal(t, http.StatusBadRequest, status(next(t, ch, results)))
	require.Equal(t, "poison", string(next(t, ch, dead).Body))

	publish(t, ch, commands, "flaky-1", "flaky")
	require.Equal(t, http.StatusCreated, status(next(t, ch, results)))
	require.Equal(t, 1, count(t, pool, "flaky-1"))
}

func TestRedeliveryAfterMissedAck(t *testing.T) {
	t.Parallel()
	conn := dial(t)
	pool, _ := newPool(t)
	commands, results, dead, ch := queues(t, conn)
	var runs atomic.Int32
	c, err := newConsumer(pool, handler(pool, &runs))
	require.NoError(t, err)

	publish(t, ch, commands, "order-1", "a")
	// Processed and committed on a channel that closes before its ack.
	lost, err := conn.Channel()
	require.NoError(t, err)
	var got amqp.Delivery
	require.Eventually(t, func() bool {
		var ok bool
		got, ok, err = lost.Get(commands, false)
		require.NoError(t, err)
		return ok
	}, time.Minute, 10*time.Millisecond)
	require.Equal(t, consumer.Ack, c.Process(context.Background(), idemamqp.Message(got)).Action)
	require.NoError(t, lost.Close()) // the broker requeues the unacknowledged delivery

	run(t, pool, handler(pool, &runs), commands, results, dead)
	a := next(t, ch, results)
	require.Equal(t, "true", a.Headers[consumer.HeaderReplayed])
	// The new consumer's replay cache does not hold the answer. Claiming
	// first on pgstore, the key's lock goes with the handler's first
	// statement: the handler starts again, that statement finds the key
	// recorded and fails, and the record answers (docs/modes.md).
	require.True(t, runs.Load() <= 2, "handler runs: %d", runs.Load())
	require.Equal(t, 1, count(t, pool, "order-1"), "the effect, once")
}

func TestSeveralConsumersOnOneQueue(t *testing.T) {
	t.Parallel()
	conn := dial(t)
	pool, _ := newPool(t)
	commands, results, dead, ch := queues(t, conn)
	var runs atomic.Int32
	for range 3 {
		run(t, pool, handler(pool, &runs), commands, results, dead)
	}
	const keys, copies = 30, 3
	for i := range keys * copies {
		publish(t, ch, commands, fmt.Sprintf("order-%d", i%keys), "a")
	}
	for range keys * copies {
		require.Equal(t, http.StatusCreated, status(next(t, ch, results)))
	}
	var effects, distinct int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT key) FROM effects").Scan(&effects, &distinct))
	require.Equal(t, keys, effects, "one effect per key")
	require.Equal(t, keys, distinct)
}
