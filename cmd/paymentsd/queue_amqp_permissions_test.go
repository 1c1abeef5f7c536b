//go:build rabbitmq

package main_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem/internal/require"
)

// setPermissions matches the rabbitmqctl set_permissions lines of
// docs/queues.md, continuation lines joined: vhost, user, and the three
// expressions as the page quotes them.
var setPermissions = regexp.MustCompile(`rabbitmqctl set_permissions -p (\S+) (\S+) ('[^']*') ('[^']*') ('[^']*')`)

// TestQueuePermissionsAMQP runs paymentsd on RabbitMQ with the
// permissions docs/queues.md recommends, read from the page, on a vhost
// of the test's own (users are the page's, suffixed): producer-a's
// command is answered on its own reply queue, and producer-b can read
// neither the commands, nor every user's answers, nor the dead letters,
// nor producer-a's replies.
func TestQueuePermissionsAMQP(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "queues.md"))
	require.NoError(t, err)
	lines := setPermissions.FindAllStringSubmatch(strings.ReplaceAll(string(doc), "\\\n    ", ""), -1)
	require.Len(t, lines, 2, "docs/queues.md's rabbitmqctl set_permissions lines")
	suffix := strings.ReplaceAll(newKey(), "key-", "")
	vhost := "idem-perm-" + suffix
	ctl := func(args ...string) {
		t.Helper()
		out, err := exec.Command("rabbitmqctl", args...).CombinedOutput()
		require.NoError(t, err, "rabbitmqctl %s (run as root, on this machine's broker): %s", strings.Join(args, " "), out)
	}
	ctl("add_vhost", vhost)
	t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "delete_vhost", vhost).Run() })
	users := map[string]string{}
	grant := func(user string, exprs []string) {
		name := user + "-" + suffix
		users[user] = name
		ctl("add_user", name, "pw-"+suffix)
		t.Cleanup(func() { _ = exec.Command("rabbitmqctl", "delete_user", name).Run() })
		args := []string{"set_permissions", "-p", vhost, name}
		for _, e := range exprs {
			args = append(args, strings.Trim(e, "'"))
		}
		ctl(args...)
	}
	for _, l := range lines {
		require.Equal(t, "/", l[1])
		grant(l[2], l[3:])
		if l[2] == "producer-a" { // a second producer, as the page says for any other
			var exprs []string
			for _, e := range l[3:] {
				exprs = append(exprs, strings.ReplaceAll(e, "producer-a", "producer-b"))
			}
			grant("producer-b", exprs)
		}
	}
	dial := func(user string) *amqp.Connection {
		t.Helper()
		conn, err := amqp.Dial("amqp://" + users[user] + ":pw-" + suffix + "@127.0.0.1:5672/" + url.PathEscape(vhost))
		require.NoError(t, err, "%s connects", user)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	s := startServer(t, newDB(t, "sqlite"), "--amqp-url", "amqp://"+users["paymentsd"]+":pw-"+suffix+"@127.0.0.1:5672/"+url.PathEscape(vhost))
	u := s.newUser(t)
	waitFor(t, func() bool { return strings.Contains(s.stderr.String(), "consuming commands") }, "paymentsd consuming: %s", s.stderr)

	// producer-b cannot read what carries producer-a's command or answer.
	a, b := dial("producer-a"), dial("producer-b")
	ach, err := a.Channel()
	require.NoError(t, err)
	replyTo := "payments.results.producer-a.1"
	_, err = ach.QueueDeclare(replyTo, false, true, true, false, nil)
	require.NoError(t, err, "producer-a declares its reply queue")
	replies, err := ach.Consume(replyTo, "", true, true, false, false, nil)
	require.NoError(t, err)
	for _, q := range []string{"payments.commands.deposits", "payments.commands.transactions", "payments.results", "payments.deadletter", replyTo} {
		ch, err := b.Channel()
		require.NoError(t, err)
		_, err = ch.Consume(q, "", true, false, false, false, nil)
		require.ErrorContains(t, err, "ACCESS_REFUSED", "producer-b consumes %s", q)
		ch, err = b.Channel()
		require.NoError(t, err)
		_, _, err = ch.Get(q, true)
		require.ErrorContains(t, err, "ACCESS_REFUSED", "producer-b gets from %s", q)
	}

	// producer-a's command, answered on its own reply queue.
	require.NoError(t, ach.Confirm(false))
	dc, err := ach.PublishWithDeferredConfirmWithContext(context.Background(), "", "payments.commands.deposits", false, false, amqp.Publishing{
		Headers: amqp.Table{"Idempotency-Key": newKey(), "Authorization": "Bearer " + u.apiKey},
		Body:    []byte(`{"currency":"USD","amount":100}`), ContentType: "application/json", ReplyTo: replyTo,
	})
	require.NoError(t, err)
	require.True(t, dc.Wait(), "the broker took producer-a's command")
	select {
	case got := <-replies:
		require.Equal(t, "201", got.Headers["Idem-Status"], "%s", got.Body)
	case <-time.After(patience):
		t.Fatalf("no answer on producer-a's reply queue within %v", patience)
	}
	require.Equal(t, map[string]int64{"USD": 100}, u.balances(t))
}
