package main_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	nc, err := nats.Connect(url, nats.Timeout(patience))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	results, err := nc.SubscribeSync("payments.results")
	require.NoError(t, err)
	inbox := "payments.results." + nats.NewInbox() // where paymentsd sends a Reply-To's answer
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

// TestQueueReplyTo sends commands whose Reply-To points into the command
// subjects, with and without a user: an answer goes to a Reply-To under
// payments.results. only, an unauthenticated command's only to the dead
// letters (stripped of its credentials), and JetStream keeps no command
// once it is settled.
func TestQueueReplyTo(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	s := startServer(t, newDB(t, "postgres"), "--nats-url", url)
	u := s.newUser(t)
	nc, err := nats.Connect(url, nats.Timeout(patience))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	commands, err := nc.SubscribeSync("payments.commands.>")
	require.NoError(t, err)
	results, err := nc.SubscribeSync("payments.results.>")
	require.NoError(t, err)
	result, err := nc.SubscribeSync("payments.results")
	require.NoError(t, err)
	dead, err := nc.SubscribeSync("payments.deadletter")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	stream, err := js.Stream(context.Background(), "PAYMENTS")
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, jetstream.WorkQueuePolicy, info.Config.Retention)
	settled := func(what string) {
		waitFor(t, func() bool {
			info, err := stream.Info(context.Background())
			require.NoError(t, err)
			return info.State.Msgs == 0
		}, "PAYMENTS keeps no settled command (%s)", what)
	}
	publish := func(apiKey, replyTo, body string) {
		t.Helper()
		_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "payments.commands.deposits", Data: []byte(body), Header: nats.Header{
			"Idempotency-Key": {newKey()}, "Authorization": {"Bearer " + apiKey}, "Reply-To": {replyTo},
		}})
		require.NoError(t, err)
	}

	publish("sk_not-a-key", "payments.results.mine", `{"currency":"USD","amount":1}`)
	d, err := dead.NextMsg(patience)
	require.NoError(t, err, "the unauthenticated command is dead-lettered")
	require.Equal(t, "401", d.Header.Get(consumer.HeaderStatus))
	require.Empty(t, d.Header.Get("Authorization"), "credentials never reach the dead letters")
	settled("a dead letter")
	require.Zero(t, s.sqlInt(t, "SELECT count(*) FROM idempotency_keys"), "an unauthenticated command never reaches the key table")

	publish(u.apiKey, "payments.commands.transactions", `{"currency":"USD","amount":2}`)
	r, err := result.NextMsg(patience)
	require.NoError(t, err, "the answer on payments.results")
	require.Equal(t, "201", r.Header.Get(consumer.HeaderStatus), "the 401 before it was answered nowhere")
	settled("an acknowledged command")
	require.NoError(t, nc.Flush())
	for _, sub := range []*nats.Subscription{commands, results} {
		n, _, err := sub.Pending()
		require.NoError(t, err)
		want := map[*nats.Subscription]int{commands: 2, results: 0}[sub]
		require.Equal(t, want, n, "messages on %s: the two commands, and no answer", sub.Subject)
	}
	require.Equal(t, map[string]int64{"USD": 2}, u.balances(t))
}

// TestQueueOldNATS starts paymentsd on a server that introduces itself as
// nats-server 2.9.10, too old for a consumer of several subjects: it
// exits at once, saying so in one line.
func TestQueueOldNATS(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = fmt.Fprintf(c, "INFO {\"server_id\":\"old\",\"version\":\"2.9.10\",\"proto\":1,\"headers\":true,\"max_payload\":1048576,\"jetstream\":true}\r\n")
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "PING") {
						_, _ = fmt.Fprintf(c, "PONG\r\n")
					}
				}
			}()
		}
	}()
	_, stderr, code := runCLI(t, env(), "serve", "--addr", "127.0.0.1:0", "--db", newDB(t, "sqlite"), "--nats-url", "nats://"+ln.Addr().String())
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "nats-server 2.9.10 is too old: the queue door needs nats-server 2.10 or later")
}
