package idemamqp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
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

func dial(t *testing.T) *amqp.Connection {
	t.Helper()
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = DefaultURL
	}
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
// and the dead letters, deleted when the test ends.
func queues(t *testing.T, conn *amqp.Connection) (commands, results, dead string, ch *amqp.Channel) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	var b [6]byte
	_, _ = rand.Read(b[:])
	base := "idemamqp-test-" + hex.EncodeToString(b[:])
	commands, results, dead = base+".commands", base+".results", base+".dead"
	for _, q := range []string{commands, results, dead} {
		_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		t.Cleanup(func() {
			c, err := conn.Channel()
			if err == nil {
				_, _ = c.QueueDelete(q, false, false, false)
				_ = c.Close()
			}
		})
	}
	return commands, results, dead, ch
}

func newPool(t *testing.T) *pgxpool.Pool {
	pool := pgtest.Pool(t, 16)
	_, err := pgstore.Migrate(context.Background(), pool)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), "CREATE TABLE effects (key text NOT NULL)")
	require.NoError(t, err)
	return pool
}

// handler records an effect and answers 201; a body "poison" is a final
// failure (400), "flaky" fails retriably (503) on its first two deliveries.
func handler(pool *pgxpool.Pool, runs *atomic.Int32) consumer.HandlerFunc {
	return func(ctx context.Context, m *consumer.Message) idem.Reply {
		n := runs.Add(1)
		switch string(m.Body) {
		case "poison":
			return idem.Reply{StatusCode: http.StatusBadRequest}
		case "flaky":
			if m.Deliveries < 3 {
				return idem.Reply{StatusCode: http.StatusServiceUnavailable}
			}
		}
		if _, err := pgstore.DB(ctx, pool).Exec(ctx, "INSERT INTO effects VALUES ($1)", idem.KeyFromContext(ctx)); err != nil {
			return idem.Reply{StatusCode: http.StatusInternalServerError}
		}
		return idem.Reply{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"run":%d}`, n)}
	}
}

func run(t *testing.T, conn *amqp.Connection, pool *pgxpool.Pool, runs *atomic.Int32, commands, results, dead string) {
	t.Helper()
	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeAtomic})
	require.NoError(t, err)
	c, err := consumer.New(mw, handler(pool, runs), consumer.Config{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	ac, err := idemamqp.New(c, conn, idemamqp.Config{ResultQueue: results, DeadLetterQueue: dead, Workers: 4})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ac.Run(ctx, commands) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

func publish(t *testing.T, ch *amqp.Channel, queue, key, body string) {
	t.Helper()
	err := ch.PublishWithContext(context.Background(), "", queue, false, false, amqp.Publishing{
		Headers: amqp.Table{"Idempotency-Key": key}, Body: []byte(body), DeliveryMode: amqp.Persistent,
	})
	require.NoError(t, err)
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

func count(t *testing.T, pool *pgxpool.Pool, key string) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM effects WHERE key = $1", key).Scan(&n))
	return n
}

func TestDuplicatesPoisonAndRetries(t *testing.T) {
	t.Parallel()
	conn, pool := dial(t), newPool(t)
	commands, results, dead, ch := queues(t, conn)
	var runs atomic.Int32
	run(t, conn, pool, &runs, commands, results, dead)

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
	conn, pool := dial(t), newPool(t)
	commands, results, dead, ch := queues(t, conn)
	var runs atomic.Int32
	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeAtomic})
	require.NoError(t, err)
	c, err := consumer.New(mw, handler(pool, &runs), consumer.Config{})
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

	run(t, conn, pool, &runs, commands, results, dead)
	a := next(t, ch, results)
	require.Equal(t, "true", a.Headers[consumer.HeaderReplayed])
	require.Equal(t, int32(1), runs.Load())
	require.Equal(t, 1, count(t, pool, "order-1"))
}

func TestSeveralConsumersOnOneQueue(t *testing.T) {
	t.Parallel()
	conn, pool := dial(t), newPool(t)
	commands, results, dead, ch := queues(t, conn)
	var runs atomic.Int32
	for range 3 {
		run(t, dial(t), pool, &runs, commands, results, dead)
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
