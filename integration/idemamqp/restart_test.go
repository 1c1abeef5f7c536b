package idemamqp_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/internal/require"
)

// brokerRestarter returns what restarts the RabbitMQ at AMQP_URL: its
// application stopped and started again with rabbitmqctl, which drops
// every connection and keeps the durable queues. It fails the test unless
// the broker is local and rabbitmqctl may run; when the test ends the
// application is started again, whatever happened.
func brokerRestarter(t *testing.T) (stop, start func()) {
	t.Helper()
	u, err := url.Parse(brokerURL())
	require.NoError(t, err)
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Fatalf("restarting RabbitMQ needs it on this machine (AMQP_URL on localhost), got %s", u.Host)
	}
	ctl, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		t.Fatalf("restarting RabbitMQ needs rabbitmqctl on PATH, run by a user that may manage the node (root): %v", err)
	}
	app := func(cmd string) {
		out, err := exec.Command(ctl, cmd).CombinedOutput()
		require.NoError(t, err, "rabbitmqctl %s: %s", cmd, out)
	}
	t.Cleanup(func() { app("start_app") }) // the next tests need the broker
	return func() { app("stop_app") }, func() { app("start_app") }
}

// TestBrokerRestart restarts the broker with deliveries in the handlers:
// they commit while the broker is down, their answers and acks are lost,
// and after the restart the consumer, connected again, answers them from
// their keys' records. Not parallel: it takes the broker away from every
// test (no other test of this package runs meanwhile).
func TestBrokerRestart(t *testing.T) {
	stopBroker, startBroker := brokerRestarter(t)
	pool, _ := newPool(t)
	commands, results, dead, ch := queues(t, dial(t))
	var runs, holding atomic.Int32
	release := make(chan struct{})
	effect := handler(pool, &runs)
	stop := run(t, pool, func(ctx context.Context, m *consumer.Message) idem.Response {
		if strings.HasPrefix(idem.KeyFromContext(ctx), "held-") {
			holding.Add(1)
			<-release
		}
		return effect(ctx, m)
	}, commands, results, dead)

	keys := map[string]bool{}
	send := func(ch *amqp.Channel, prefix string, n int) {
		for i := range n {
			key := fmt.Sprintf("%s-%d", prefix, i)
			publish(t, ch, commands, key, "a")
			keys[key] = true
		}
	}
	// Each key's first answer, and whether a duplicate of before-0 sent
	// after the restart was answered from its record. A delivery whose ack
	// the restart lost is answered again, replayed.
	first := map[string]amqp.Delivery{}
	var replayedAgain bool
	answer := func(ch *amqp.Channel) {
		d := next(t, ch, results)
		key, _ := d.Headers["Idempotency-Key"].(string)
		if _, seen := first[key]; !seen {
			require.Equal(t, http.StatusCreated, status(d), key)
			first[key] = d
		} else if key == "before-0" && d.Headers[consumer.HeaderReplayed] == "true" {
			replayedAgain = true
		}
	}
	send(ch, "before", 10)
	for len(first) < 10 {
		answer(ch)
	}
	// Four workers hold a delivery each in the handler, four more wait in
	// the prefetch.
	const held = 8
	send(ch, "held", held)
	require.Eventually(t, func() bool { return holding.Load() == 4 }, time.Minute, 10*time.Millisecond)
	stopBroker()
	close(release)
	startBroker()

	ch = reconnect(t)
	send(ch, "after", 10)
	publish(t, ch, commands, "before-0", "a")
	for len(first) < len(keys) || !replayedAgain {
		answer(ch)
	}
	var replayedHeld int
	for i := range held {
		if first[fmt.Sprintf("held-%d", i)].Headers[consumer.HeaderReplayed] == "true" {
			replayedHeld++
		}
	}
	require.True(t, replayedHeld >= 4, "the held deliveries, committed while the broker was down, are answered from their records: %d of them", replayedHeld)
	var effects, distinct int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT key) FROM effects").Scan(&effects, &distinct))
	require.Equal(t, len(keys), effects, "one effect per key")
	require.Equal(t, len(keys), distinct)
	stop()
	settled(t, ch, commands)
	settled(t, ch, dead)
}

// reconnect dials the broker until it answers again, and returns a
// channel in confirm mode.
func reconnect(t *testing.T) *amqp.Channel {
	t.Helper()
	var conn *amqp.Connection
	require.Eventually(t, func() bool {
		var err error
		conn, err = amqp.Dial(brokerURL())
		return err == nil
	}, time.Minute, 50*time.Millisecond, "RabbitMQ did not come back")
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	return ch
}
