package idemamqp

import (
	"context"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem/internal/require"
)

// TestSendAfterChannelError: the broker closes the publishing channel, not
// its connection (here for a publish to an exchange that does not exist);
// the next answer is published all the same, on a channel opened again.
// The consumer's tests with PostgreSQL are in module integration.
func TestSendAfterChannelError(t *testing.T) {
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at %s: %v\n"+
			"Set AMQP_URL to a RabbitMQ you may declare queues in, or install and start one "+
			"(Debian/Ubuntu: apt-get install rabbitmq-server && service rabbitmq-server start).", url, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &Consumer{}
	require.NoError(t, c.use(conn))
	require.NoError(t, c.send(ctx, q.Name, amqp.Publishing{Body: []byte("before")}))

	closed := c.pub.NotifyClose(make(chan *amqp.Error, 1))
	require.NoError(t, c.pub.PublishWithContext(ctx, "idemamqp-no-such-exchange", "", false, false, amqp.Publishing{}))
	select {
	case e := <-closed:
		require.True(t, e != nil && e.Code == amqp.NotFound, "the broker closes the channel: %v", e)
	case <-ctx.Done():
		t.Fatal("the broker did not close the channel")
	}
	require.False(t, conn.IsClosed(), "the connection stays open")

	require.NoError(t, c.send(ctx, q.Name, amqp.Publishing{Body: []byte("after")}), "the answer after a channel error")
	for _, want := range []string{"before", "after"} {
		m, ok, err := ch.Get(q.Name, true)
		require.NoError(t, err)
		require.True(t, ok, "message %q in the queue", want)
		require.Equal(t, want, string(m.Body))
	}
}
