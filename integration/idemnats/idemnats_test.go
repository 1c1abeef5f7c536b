package idemnats_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemnats"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// newPool returns a pool on a migrated schema of its own with the effects
// table, and the schema's URL for a child process.
func newPool(t *testing.T) (*pgxpool.Pool, string) {
	pool, url := pgtest.PoolURL(t, 16)
	_, err := pgstore.Migrate(context.Background(), pool)
	require.NoError(t, err)
	newEffects(t, pool)
	return pool, url
}

func TestDuplicatePublishesTakeEffectOnce(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	s := startBroker(t, t.TempDir(), 0)
	nc, js, cons := connect(t, s.ClientURL(), 30*time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	run(t, newConsumer(t, pool, handler(pool, nil)), js, cons, 1)

	publish(t, js, "cmds.pay", "order-1", "a")
	publish(t, js, "cmds.pay", "order-1", "a")
	first, again := next(t, sub), next(t, sub)
	require.Equal(t, http.StatusCreated, first.status)
	require.False(t, first.replayed)
	require.True(t, again.replayed, "the duplicate is answered from the key's record")
	require.Equal(t, first.body, again.body)
	require.Equal(t, 1, countEffects(t, pool, "order-1"))

	// The same key with another body is refused with 422 and dead-lettered.
	dead, err := nc.SubscribeSync(deadLetter)
	require.NoError(t, err)
	publish(t, js, "cmds.pay", "order-1", "b")
	require.Equal(t, http.StatusUnprocessableEntity, next(t, sub).status)
	msg, err := dead.NextMsg(time.Minute)
	require.NoError(t, err)
	require.Equal(t, "b", string(msg.Data))
}

func TestRetriableFailureIsRedeliveredWithBackOff(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	s := startBroker(t, t.TempDir(), 0)
	nc, js, cons := connect(t, s.ClientURL(), 30*time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	var runs atomic.Int32
	run(t, newConsumer(t, pool, handler(pool, func() { runs.Add(1) })), js, cons, 1)

	publish(t, js, "cmds.pay", "flaky-1", "flaky")
	// The two 503s are not answers: the first answer is the third run's.
	a := next(t, sub)
	require.Equal(t, http.StatusCreated, a.status)
	require.Equal(t, int32(3), runs.Load())
	require.Equal(t, 1, countEffects(t, pool, "flaky-1"))
}

func TestPoisonMessageIsStoredAndDeadLettered(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	s := startBroker(t, t.TempDir(), 0)
	nc, js, cons := connect(t, s.ClientURL(), 30*time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	dead, err := nc.SubscribeSync(deadLetter)
	require.NoError(t, err)
	var runs atomic.Int32
	run(t, newConsumer(t, pool, handler(pool, func() { runs.Add(1) })), js, cons, 1)

	msg := &nats.Msg{Subject: "cmds.pay", Header: nats.Header{"Idempotency-Key": {"bad-1"}, "Authorization": {"Bearer secret"}}, Data: []byte("poison")}
	_, err = js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, next(t, sub).status)
	d, err := dead.NextMsg(time.Minute)
	require.NoError(t, err)
	require.Equal(t, "cmds.pay", d.Header.Get("Idem-Dead-Letter"))
	require.Equal(t, "", d.Header.Get("Authorization"), "credentials never reach the dead letters")

	// Stored as final: a duplicate replays the 400 without running again.
	publish(t, js, "cmds.pay", "bad-1", "poison")
	a := next(t, sub)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.True(t, a.replayed)
	require.Equal(t, int32(1), runs.Load())
	// Terminated, not redelivered: the consumer has nothing pending.
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	}, time.Minute, 10*time.Millisecond)
}

func TestMissingKeyIsDeadLettered(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	s := startBroker(t, t.TempDir(), 0)
	nc, js, cons := connect(t, s.ClientURL(), 30*time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	var runs atomic.Int32
	run(t, newConsumer(t, pool, handler(pool, func() { runs.Add(1) })), js, cons, 1)
	publish(t, js, "cmds.pay", "", "a")
	require.Equal(t, http.StatusBadRequest, next(t, sub).status)
	require.Zero(t, runs.Load())
}

func TestRedeliveryAfterMissedAckReplays(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	s := startBroker(t, t.TempDir(), 0)
	nc, js, cons := connect(t, s.ClientURL(), time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	var runs atomic.Int32
	c := newConsumer(t, pool, handler(pool, func() { runs.Add(1) }))

	publish(t, js, "cmds.pay", "order-1", "a")
	// Processed and committed, but the acknowledgement is lost.
	msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
	require.NoError(t, err)
	d := c.Process(context.Background(), idemnats.Message(msg))
	require.Equal(t, consumer.Ack, d.Action)

	run(t, c, js, cons, 1)
	a := next(t, sub)
	require.True(t, a.replayed, "the redelivery is answered from the key's record")
	require.Equal(t, string(d.Result.Response.Body), a.body)
	require.Equal(t, int32(1), runs.Load())
	require.Equal(t, 1, countEffects(t, pool, "order-1"))
}

func TestSeveralConsumersOnOneDurable(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	s := startBroker(t, t.TempDir(), 0)
	nc, js, _ := connect(t, s.ClientURL(), 30*time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	const keys, copies = 40, 3
	for range 3 {
		_, js2, cons2 := connect(t, s.ClientURL(), 30*time.Second)
		run(t, newConsumer(t, pool, handler(pool, nil)), js2, cons2, 4)
	}
	for i := range keys * copies {
		publish(t, js, "cmds.pay", fmt.Sprintf("order-%d", i%keys), "a")
	}
	bodies := map[string]string{}
	for range keys * copies {
		a := next(t, sub)
		require.Equal(t, http.StatusCreated, a.status)
		if b, ok := bodies[a.key]; ok {
			require.Equal(t, b, a.body, "every copy of %s gets the one answer", a.key)
		}
		bodies[a.key] = a.body
	}
	require.Len(t, bodies, keys)
	var effects, distinct int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT key) FROM effects").Scan(&effects, &distinct))
	require.Equal(t, keys, effects, "one effect per key")
	require.Equal(t, keys, distinct)
}

func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	pool, _ := newPool(t)
	dir := t.TempDir()
	s := startBroker(t, dir, 0)
	port := brokerPort(s)
	nc, js, cons := connect(t, s.ClientURL(), 30*time.Second)
	sub, err := nc.SubscribeSync(results)
	require.NoError(t, err)
	run(t, newConsumer(t, pool, handler(pool, nil)), js, cons, 2)

	publish(t, js, "cmds.pay", "before", "a")
	require.Equal(t, http.StatusCreated, next(t, sub).status)
	s.Shutdown()
	s.WaitForShutdown()
	startBroker(t, dir, port)
	// The clients reconnect; the stream and the durable consumer survived.
	require.Eventually(t, func() bool {
		_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "cmds.pay", Header: nats.Header{"Idempotency-Key": {"after"}}, Data: []byte("a")})
		return err == nil
	}, time.Minute, 50*time.Millisecond)
	publish(t, js, "cmds.pay", "before", "a")
	// A publish that failed as the broker came back may have been stored
	// all the same: "after" may be answered more than once.
	got := map[string]answer{}
	for got["before"].status == 0 || got["after"].status == 0 {
		a := next(t, sub)
		if _, seen := got[a.key]; !seen {
			got[a.key] = a
		}
	}
	require.Equal(t, http.StatusCreated, got["after"].status)
	require.False(t, got["after"].replayed)
	require.True(t, got["before"].replayed)
	require.Equal(t, 1, countEffects(t, pool, "before"))
	require.Equal(t, 1, countEffects(t, pool, "after"))
}
