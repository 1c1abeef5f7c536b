//go:build rabbitmq

// paymentsd's commands over a real RabbitMQ (AMQP_URL): make test-rabbitmq
// runs these tests (go test -tags rabbitmq), make test does not need one.
// They use paymentsd's fixed queue names, so they run one at a time.

package main_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/internal/require"
)

// amqpURL is AMQP_URL, or the RabbitMQ on this machine.
func amqpURL() string {
	if url := os.Getenv("AMQP_URL"); url != "" {
		return url
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// amqpCommander publishes payment commands to RabbitMQ as a user, and
// reads their answers on a reply queue of its own and on payments.results.
type amqpCommander struct {
	u       *user
	ch      *amqp.Channel // in confirm mode
	replyTo string
	replies <-chan amqp.Delivery
	finals  map[string]string // the commands answered with a final failure: body by key
}

func newAMQPCommander(t *testing.T, u *user) *amqpCommander {
	t.Helper()
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at %s: %v\n"+
			"Set AMQP_URL, or install and start one (Debian/Ubuntu: apt-get install rabbitmq-server && service rabbitmq-server start).", amqpURL(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	// Under paymentsd's reply prefix, gone with the connection.
	q, err := ch.QueueDeclare("payments.results."+newKey(), false, true, true, false, nil)
	require.NoError(t, err)
	replies, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)
	return &amqpCommander{u: u, ch: ch, replyTo: q.Name, replies: replies, finals: map[string]string{}}
}

// send publishes a command and returns its answer, as published to its
// reply-to and, the same, to payments.results.
func (c *amqpCommander) send(t *testing.T, op, key, body string) reply {
	t.Helper()
	id := newKey()
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "payments.commands."+op, false, false, amqp.Publishing{
		Headers:       amqp.Table{"Idempotency-Key": key, "Authorization": "Bearer " + c.u.apiKey},
		Body:          []byte(body),
		ContentType:   "application/json",
		DeliveryMode:  amqp.Persistent,
		ReplyTo:       c.replyTo,
		CorrelationId: id,
	})
	require.NoError(t, err)
	require.True(t, dc.Wait(), "the broker refused the command")
	var got amqp.Delivery
	select {
	case got = <-c.replies:
	case <-time.After(patience):
		t.Fatalf("no answer on the reply queue within %v", patience)
	}
	require.Equal(t, id, got.CorrelationId)
	res := c.next(t, "payments.results", func(d amqp.Delivery) bool { return d.CorrelationId == id })
	require.Equal(t, string(got.Body), string(res.Body))
	h := http.Header{}
	for k, v := range got.Headers {
		if s, ok := v.(string); ok {
			h.Add(k, s)
		}
	}
	status, err := strconv.Atoi(h.Get(consumer.HeaderStatus))
	require.NoError(t, err)
	if status >= 400 {
		c.finals[key] = body
	}
	return reply{status: status, header: h, body: got.Body}
}

// next waits for the message on queue that match says is the one, taking
// (and dropping) the others: answers left by an earlier run.
func (c *amqpCommander) next(t *testing.T, queue string, match func(amqp.Delivery) bool) amqp.Delivery {
	t.Helper()
	var found amqp.Delivery
	require.Eventually(t, func() bool {
		d, ok, err := c.ch.Get(queue, true)
		require.NoError(t, err)
		if ok && match(d) {
			found = d
			return true
		}
		return false
	}, patience, 10*time.Millisecond, "the message awaited did not arrive on %s", queue)
	return found
}

// deadLettered checks that every command answered with a final failure
// was dead-lettered, without its credentials.
func (c *amqpCommander) deadLettered(t *testing.T) {
	t.Helper()
	for len(c.finals) > 0 {
		d := c.next(t, "payments.deadletter", func(d amqp.Delivery) bool {
			key, _ := d.Headers["Idempotency-Key"].(string)
			body, ok := c.finals[key]
			return ok && body == string(d.Body)
		})
		require.Nil(t, d.Headers["Authorization"], "credentials never reach the dead letters")
		delete(c.finals, d.Headers["Idempotency-Key"].(string))
	}
}

func TestQueueCommandsAMQP(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { // not parallel: one paymentsd on the queues at a time
			s := startServer(t, newDB(t, store), "--amqp-url", amqpURL())
			u := s.newUser(t)
			c := newAMQPCommander(t, u)
			queueCommands(t, u, c)
			c.deadLettered(t)
		})
	}
}

// TestQueueReplyToAMQP is TestQueueReplyTo over RabbitMQ: a reply-to
// naming a command queue is not answered there, an unauthenticated
// command is answered only in the dead letters (stripped of its
// credentials), and no acknowledged command stays in its queue.
func TestQueueReplyToAMQP(t *testing.T) {
	s := startServer(t, newDB(t, "sqlite"), "--amqp-url", amqpURL())
	u := s.newUser(t)
	c := newAMQPCommander(t, u)
	publish := func(apiKey, replyTo, key string) {
		t.Helper()
		dc, err := c.ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "payments.commands.deposits", false, false, amqp.Publishing{
			Headers: amqp.Table{"Idempotency-Key": key, "Authorization": "Bearer " + apiKey},
			Body:    []byte(`{"currency":"USD","amount":3}`), ContentType: "application/json", DeliveryMode: amqp.Persistent,
			ReplyTo: replyTo, CorrelationId: key,
		})
		require.NoError(t, err)
		require.True(t, dc.Wait(), "the broker refused the command")
	}

	unauth := newKey()
	publish("sk_not-a-key", c.replyTo, unauth)
	d := c.next(t, "payments.deadletter", func(d amqp.Delivery) bool { return d.Headers["Idempotency-Key"] == unauth })
	require.Nil(t, d.Headers["Authorization"], "credentials never reach the dead letters")
	require.Equal(t, "401", d.Headers[consumer.HeaderStatus])

	key := newKey()
	publish(u.apiKey, "payments.commands.transactions", key)
	res := c.next(t, "payments.results", func(d amqp.Delivery) bool { return d.CorrelationId == key || d.CorrelationId == unauth })
	require.Equal(t, key, res.CorrelationId, "the 401 is answered nowhere")
	select {
	case r := <-c.replies:
		t.Fatalf("an answer on the reply queue of the unauthenticated command: %s", r.Body)
	default:
	}
	for _, q := range []string{"payments.commands.deposits", "payments.commands.transactions"} {
		info, err := c.ch.QueueDeclarePassive(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err)
		require.Zero(t, info.Messages, "%s holds no command: not the settled one, not an answer", q)
	}
	require.Equal(t, map[string]int64{"USD": 3}, u.balances(t))
}
