package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/internal/require"
)

// accountsBlock is the NATS accounts block docs/queues.md recommends,
// read from the page itself: the test runs what the page says.
var accountsBlock = regexp.MustCompile("(?s)NATS accounts .*?\n\n```\n(accounts \\{.*?\n\\})\n```")

// violation is nats-server's refusal of a subscription.
var violation = regexp.MustCompile(`Permissions Violation for Subscription to "([^"]+)"`)

// startNATSWithAccounts starts an embedded nats-server with the
// documented accounts block and JetStream, the passwords set, and
// returns its host:port.
func startNATSWithAccounts(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "queues.md"))
	require.NoError(t, err)
	m := accountsBlock.FindSubmatch(doc)
	require.NotNil(t, m, "docs/queues.md has no NATS accounts block")
	block := strings.NewReplacer("$PAYMENTSD_PASS", `"pd-pass"`, "$PRODUCER_A_PASS", `"a-pass"`, "$PRODUCER_B_PASS", `"b-pass"`).Replace(string(m[1]))
	conf := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\njetstream { store_dir: \""+t.TempDir()+"\" }\n"+block+"\n"), 0o600))
	opts, err := natsserver.ProcessConfigFile(conf)
	require.NoError(t, err)
	opts.NoSigs, opts.NoLog = true, true
	ns, err := natsserver.NewServer(opts)
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(patience), "the embedded NATS server did not start")
	t.Cleanup(ns.Shutdown)
	return ns.Addr().String()
}

// TestQueuePermissions runs paymentsd on a nats-server configured with
// exactly the accounts block docs/queues.md recommends: producer-a's
// command is answered on its own reply subject, and producer-b can
// subscribe to nothing that carries it (paymentsd's inbox, where pull
// deliveries travel; another producer's inbox or results; the commands;
// everything), and receives nothing of it.
func TestQueuePermissions(t *testing.T) {
	t.Parallel()
	addr := startNATSWithAccounts(t)
	s := startServer(t, newDB(t, "sqlite"), "--nats-url", "nats://paymentsd:pd-pass@"+addr)
	u := s.newUser(t)

	// producer-b subscribes to everything it might read producer-a's
	// command or answer on; the server refuses each.
	var (
		mu      sync.Mutex
		refused = map[string]bool{}
	)
	b, err := nats.Connect("nats://producer-b:b-pass@"+addr, nats.CustomInboxPrefix("_INBOX_producer-b"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if m := violation.FindStringSubmatch(err.Error()); m != nil {
				mu.Lock()
				refused[m[1]] = true
				mu.Unlock()
			}
		}))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	seen := make(chan *nats.Msg, 64)
	spied := []string{">", "_INBOX.>", "_INBOX_paymentsd.>", "_INBOX_producer-a.>", "payments.commands.>",
		"payments.results", "payments.results.producer-a.>", "payments.deadletter", "$JS.API.>"}
	for _, subject := range spied {
		_, err := b.ChanSubscribe(subject, seen)
		require.NoError(t, err)
	}
	require.NoError(t, b.Flush())
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) == len(spied)
	}, "the server to refuse every subscription of producer-b's: %v", func() any { mu.Lock(); defer mu.Unlock(); return refused }())

	// producer-a publishes a command through JetStream and reads its answer.
	a, err := nats.Connect("nats://producer-a:a-pass@"+addr, nats.CustomInboxPrefix("_INBOX_producer-a"))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	replies, err := a.SubscribeSync("payments.results.producer-a.1")
	require.NoError(t, err)
	js, err := jetstream.New(a)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	_, err = js.PublishMsg(ctx, &nats.Msg{Subject: "payments.commands.deposits", Data: []byte(`{"currency":"USD","amount":100}`), Header: nats.Header{
		"Idempotency-Key": {newKey()}, "Authorization": {"Bearer " + u.apiKey}, "Reply-To": {"payments.results.producer-a.1"},
	}})
	require.NoError(t, err, "producer-a publishes its command through JetStream")
	got, err := replies.NextMsg(patience)
	require.NoError(t, err, "producer-a's answer, on its own reply subject")
	require.Equal(t, "201", got.Header.Get("Idem-Status"), "%s", got.Data)
	require.Equal(t, map[string]int64{"USD": 100}, u.balances(t))

	// producer-b saw nothing of it. Its own command, published now and
	// answered after paymentsd took it from the stream behind
	// producer-a's, marks the point by which anything the server routed
	// to producer-b before (producer-a's delivery, its acknowledgement,
	// its answer) has arrived: one connection's messages arrive in order.
	mine, err := b.SubscribeSync("payments.results.producer-b.1")
	require.NoError(t, err)
	require.NoError(t, b.PublishMsg(&nats.Msg{Subject: "payments.commands.deposits", Data: []byte(`{"currency":"USD","amount":250}`), Header: nats.Header{
		"Idempotency-Key": {newKey()}, "Authorization": {"Bearer " + u.apiKey}, "Reply-To": {"payments.results.producer-b.1"},
	}}))
	got, err = mine.NextMsg(patience)
	require.NoError(t, err, "producer-b's own answer")
	require.Equal(t, "201", got.Header.Get("Idem-Status"), "%s", got.Data)
	var leaked []string
	for len(seen) > 0 {
		m := <-seen
		leaked = append(leaked, fmt.Sprintf("%s %v %.60q", m.Subject, m.Header, m.Data))
	}
	require.Empty(t, leaked, "producer-b received messages not its own")
	require.Equal(t, map[string]int64{"USD": 350}, u.balances(t))
}
