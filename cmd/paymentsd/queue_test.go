package main_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/internal/require"
)

// startNATS starts an embedded NATS server with JetStream, stopped when the
// test ends, and returns its URL.
func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(patience), "the embedded NATS server did not start")
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// commander publishes payment commands to a broker as a user and returns
// their answers.
type commander interface {
	send(t *testing.T, op, key, body string) reply
}

// natsCommander publishes payment commands to JetStream.
type natsCommander struct {
	u       *user
	js      jetstream.JetStream
	results *nats.Subscription
	replies *nats.Subscription
	inbox   string
}

func newNATSCommander(t *testing.T, url string, u *user) *natsCommander {
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	results, err := nc.SubscribeSync("payments.results")
	require.NoError(t, err)
	inbox := nats.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	return &natsCommander{u: u, js: js, results: results, replies: replies, inbox: inbox}
}

// send publishes a command and returns its answer, as published to its
// Reply-To and, the same, to payments.results.
func (c *natsCommander) send(t *testing.T, op, key, body string) reply {
	t.Helper()
	msg := &nats.Msg{Subject: "payments.commands." + op, Data: []byte(body), Header: nats.Header{
		"Idempotency-Key": {key}, "Authorization": {"Bearer " + c.u.apiKey}, "Reply-To": {c.inbox},
	}}
	_, err := c.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	got, err := c.replies.NextMsg(patience)
	require.NoError(t, err, "no answer on the reply subject")
	res, err := c.results.NextMsg(patience)
	require.NoError(t, err, "no answer on payments.results")
	require.Equal(t, string(got.Data), string(res.Data))
	status, err := strconv.Atoi(got.Header.Get(consumer.HeaderStatus))
	require.NoError(t, err)
	h := http.Header(got.Header)
	return reply{status: status, header: h, body: got.Data}
}

func TestQueueCommands(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			s := startServer(t, newDB(t, store), "--nats-url", url)
			u := s.newUser(t)
			queueCommands(t, u, newNATSCommander(t, url, u))
		})
	}
}

// queueCommands sends u's commands through c, and over HTTP with the same
// keys: one key is one effect whichever door it comes by.
func queueCommands(t *testing.T, u *user, c commander) {
	t.Helper()
	deposit := `{"currency":"USD","amount":10000}`

	// HTTP first, then the same key as a message: replayed.
	key := newKey()
	first := u.post(t, "/v1/deposits", key, deposit)
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	again := c.send(t, "deposits", key, deposit)
	require.Equal(t, http.StatusCreated, again.status)
	require.True(t, again.replayed())
	require.Equal(t, string(first.body), string(again.body), "byte-identical")
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))

	// The same key with another body: the 422 the HTTP API answers.
	other := c.send(t, "deposits", key, `{"currency":"USD","amount":1}`)
	require.Equal(t, http.StatusUnprocessableEntity, other.status)
	require.Equal(t, "key-reused", other.problemType(t))

	// A message first, then the same message again, then the same key
	// over HTTP: replayed.
	key = newKey()
	transfer := `{"source_currency":"USD","target_currency":"EUR","amount":1000}`
	msg := c.send(t, "transactions", key, transfer)
	require.Equal(t, http.StatusCreated, msg.status, "%s", msg)
	require.False(t, msg.replayed())
	dup := c.send(t, "transactions", key, transfer)
	require.True(t, dup.replayed())
	require.Equal(t, string(msg.body), string(dup.body))
	retry := u.post(t, "/v1/transactions", key, "{ \"amount\": 1000, \"source_currency\": \"USD\", \"target_currency\": \"EUR\" }")
	require.True(t, retry.replayed())
	require.Equal(t, string(msg.body), string(retry.body))

	// A final failure is answered and dead-lettered.
	poor := c.send(t, "transactions", newKey(), `{"source_currency":"USD","target_currency":"EUR","amount":100000000}`)
	require.Equal(t, http.StatusPaymentRequired, poor.status)

	// The deposits' minute net's 409 is final, as over HTTP and gRPC: it
	// is stored under its key, and the same message again replays it.
	if now := time.Now(); now.Second() >= 50 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
	}
	net := `{"currency":"USD","amount":4242}`
	made := c.send(t, "deposits", newKey(), net)
	require.Equal(t, http.StatusCreated, made.status, "%s", made)
	key = newKey()
	refused := c.send(t, "deposits", key, net)
	require.Equal(t, http.StatusConflict, refused.status, "%s", refused)
	require.Equal(t, "duplicate-deposit", refused.problemType(t))
	replayed := c.send(t, "deposits", key, net)
	require.True(t, replayed.replayed(), "the refusal is the key's answer: %s", replayed)
	require.Equal(t, string(refused.body), string(replayed.body))

	require.Equal(t, map[string]int64{"USD": 9000 + 4242, "EUR": 920}, u.balances(t), "each key moved money once")
}

func TestQueueUnauthorized(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	s := startServer(t, newDB(t, "postgres"), "--nats-url", url)
	c := newNATSCommander(t, url, &user{s: s, apiKey: "not-a-key"})
	r := c.send(t, "deposits", newKey(), `{"currency":"USD","amount":1}`)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Zero(t, s.sqlInt(t, "SELECT count(*) FROM idempotency_keys"), "an unauthenticated command never reaches the key table")
}
