package idemnats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemnats"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
)

// The stream the tests consume: commands on cmds.>, failures on dead.
const (
	streamName = "CMDS"
	durable    = "worker"
	results    = "results"
	deadLetter = "dead"
)

// startBroker starts an embedded NATS server with JetStream, its files in
// dir, on port (0: any free port), stopped when the test ends.
func startBroker(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(30*time.Second), "the embedded NATS server did not start")
	t.Cleanup(s.Shutdown)
	return s
}

func brokerPort(s *server.Server) int { return s.Addr().(*net.TCPAddr).Port }

// connect connects to s and makes the stream and the durable consumer.
func connect(t *testing.T, url string, ackWait time.Duration) (*nats.Conn, jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{"cmds.>", deadLetter}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "cmds.>", AckWait: ackWait,
	})
	require.NoError(t, err)
	return nc, js, cons
}

// effects is the business table: one row per time the handler's work
// committed, so a double effect is two rows for one key.
func newEffects(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS effects (key text NOT NULL, n bigserial)")
	require.NoError(t, err)
}

func countEffects(t *testing.T, pool *pgxpool.Pool, key string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM effects WHERE key = $1", key).Scan(&n))
	return n
}

// handler records an effect and answers 201; a body "poison" is a final
// failure (400), "flaky" fails retriably (503) on its first two deliveries.
func handler(pool *pgxpool.Pool, before func()) consumer.HandlerFunc {
	return func(ctx context.Context, m *consumer.Message) idem.Response {
		if before != nil {
			before()
		}
		switch string(m.Body) {
		case "poison":
			return idem.Response{StatusCode: http.StatusBadRequest, Body: []byte(`{"error":"poison"}`)}
		case "flaky":
			if m.Deliveries < 3 {
				return idem.Response{StatusCode: http.StatusServiceUnavailable}
			}
		}
		var n int64
		key := idem.KeyFromContext(ctx)
		if err := pgstore.DB(ctx, pool).QueryRow(ctx, "INSERT INTO effects (key) VALUES ($1) RETURNING n", key).Scan(&n); err != nil {
			return idem.Response{StatusCode: http.StatusInternalServerError}
		}
		return idem.Response{StatusCode: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: fmt.Appendf(nil, `{"key":%q,"n":%d}`, key, n)}
	}
}

// newConsumer is the consumer under test, on a migrated store in pool.
func newConsumer(t testing.TB, pool *pgxpool.Pool, h consumer.HandlerFunc) *consumer.Consumer {
	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(mw, h, consumer.Config{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs an idemnats.Consumer on cons until the test ends.
func run(t *testing.T, c *consumer.Consumer, js jetstream.JetStream, cons jetstream.Consumer, workers int) {
	t.Helper()
	nc, err := idemnats.New(c, js, idemnats.Config{ResultSubject: results, DeadLetterSubject: deadLetter, Workers: workers})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nc.Run(ctx, cons) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// publish publishes a command with key (and a fresh message id, as a
// producer's retry has).
func publish(t *testing.T, js jetstream.JetStream, subject, key, body string) {
	t.Helper()
	msg := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: []byte(body)}
	if key != "" {
		msg.Header.Set("Idempotency-Key", key)
	}
	_, err := js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

// answer is a published result.
type answer struct {
	key      string
	status   int
	replayed bool
	body     string
}

// next waits for the next published answer on sub.
func next(t *testing.T, sub *nats.Subscription) answer {
	t.Helper()
	msg, err := sub.NextMsg(time.Minute)
	require.NoError(t, err, "no answer was published")
	status, _ := strconv.Atoi(msg.Header.Get(consumer.HeaderStatus))
	return answer{key: msg.Header.Get("Idempotency-Key"), status: status, replayed: msg.Header.Get(consumer.HeaderReplayed) == "true", body: string(msg.Data)}
}

// runOf is the n of an answer's body: which run of the handler it is.
func runOf(t *testing.T, a answer) int64 {
	t.Helper()
	var v struct{ N int64 }
	require.NoError(t, json.Unmarshal([]byte(a.body), &v), a.body)
	return v.N
}
