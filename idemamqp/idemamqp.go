// Package idemamqp consumes RabbitMQ (AMQP 0-9-1) messages once per key:
// the RabbitMQ adapter of package consumer (docs/queues.md).
//
// A delivery is acknowledged only after its handler's writes and its key's
// completion committed; a redelivery of a completed message is
// acknowledged without running the handler, and its stored reply is
// published again; a retriable failure is requeued after its back-off
// (RabbitMQ has no delayed negative acknowledgement, so the delivery holds
// its prefetch slot meanwhile); a final failure is published, with a
// publisher confirm, to the dead-letter queue and acknowledged, never
// redelivered. Quorum queues count deliveries (x-delivery-count), which
// bounds the retries of a message that keeps failing.
//
// A lost connection (a broker restart, a broken network) ends Run, or,
// with [Config.Redial], is replaced and consuming goes on; either way the
// deliveries unacknowledged on it come back from the broker and are
// answered from their keys' records. amqp091-go's own recovery
// (amqp.Config.Recovery) is refused: it reopens a channel under the same
// object, on which a late acknowledgement of a delivery taken before the
// loss would settle another delivery that has the same tag.
package idemamqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem/consumer"
)

// Config configures a Consumer. Its zero value is valid.
type Config struct {
	// ResultQueue, when set, receives every answer (executed, replayed or
	// refused) but a 401's through the default exchange, besides the
	// delivery's reply-to. Default none.
	ResultQueue string
	// DeadLetterQueue receives, through the default exchange and with a
	// publisher confirm, a copy of every message that failed for good
	// (without its Authorization header). Default none: such a delivery
	// is rejected without requeueing, to the queue's own dead-letter
	// exchange if it has one.
	DeadLetterQueue string
	// Workers is how many deliveries are processed at once; the prefetch
	// is twice as many. Default 1.
	Workers int
	// Logger receives the failures to publish, acknowledge or
	// dead-letter, and the lost connections, never a body. Default
	// slog.Default().
	Logger *slog.Logger
	// Redial, when set, opens a connection to replace one that was lost:
	// Run then goes on consuming on it. Default nil: Run returns when the
	// connection is lost, and the caller makes a new Consumer on a new
	// connection.
	Redial func(context.Context) (*amqp.Connection, error)
	// RedialDelay is the wait before each attempt to consume again after a
	// failure, and before each call of Redial. Default 1s.
	RedialDelay time.Duration
}

// Consumer processes a queue's deliveries with a consumer.Consumer.
type Consumer struct {
	c   *consumer.Consumer
	cfg Config

	connMu sync.Mutex       // guards conn, and is held while reconnecting
	conn   *amqp.Connection // the one given to New, or the last one Redial opened

	mu      sync.Mutex       // guards pub and pubConn, and pub's publishes
	pub     *amqp.Channel    // on pubConn, in confirm mode
	pubConn *amqp.Connection // the connection pub is on
}

// New returns a Consumer that processes deliveries with c and publishes
// answers on a channel of its own on conn. It fails on an invalid Config,
// a connection that recovers by itself, or when the channel cannot be
// opened.
func New(c *consumer.Consumer, conn *amqp.Connection, cfg Config) (*Consumer, error) {
	if c == nil || conn == nil {
		return nil, errors.New("idemamqp: New needs a consumer and a connection")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("idemamqp: Workers must be positive, got %d", cfg.Workers)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RedialDelay == 0 {
		cfg.RedialDelay = time.Second
	}
	if cfg.RedialDelay < 0 {
		return nil, fmt.Errorf("idemamqp: RedialDelay must be positive, got %v", cfg.RedialDelay)
	}
	ac := &Consumer{c: c, cfg: cfg}
	if err := ac.use(conn); err != nil {
		return nil, err
	}
	return ac, nil
}

// use makes conn the connection, with a publishing channel of its own.
// The caller holds connMu, or is New.
func (c *Consumer) use(conn *amqp.Connection) error {
	if conn.IsRecoveryEnabled() {
		return errors.New("idemamqp: the connection recovers by itself (amqp.Config.Recovery): use Config.Redial instead")
	}
	pub, err := confirmChannel(conn)
	if err != nil {
		return err
	}
	c.conn = conn
	c.mu.Lock()
	c.pub, c.pubConn = pub, conn
	c.mu.Unlock()
	return nil
}

// confirmChannel opens a channel on conn in confirm mode.
func confirmChannel(conn *amqp.Connection) (*amqp.Channel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("idemamqp: open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("idemamqp: confirm mode: %w", err)
	}
	return ch, nil
}

// Close closes the connection: the one given to New, or the last one
// Redial opened. Call it once every Run has returned.
func (c *Consumer) Close() error {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	return c.conn.Close()
}

// Run consumes queue until ctx ends, then lets the deliveries being
// processed finish. Without [Config.Redial] it returns early, with the
// error, when the connection or the channel fails; with it, it consumes
// again after [Config.RedialDelay], on a new connection if the old one was
// lost. Several Runs of one Consumer share its connection, and one
// reconnection.
func (c *Consumer) Run(ctx context.Context, queue string) error {
	for {
		c.connMu.Lock()
		conn := c.conn
		c.connMu.Unlock()
		err := c.consume(ctx, conn, queue)
		if err == nil || c.cfg.Redial == nil {
			return err
		}
		c.cfg.Logger.WarnContext(ctx, "rabbitmq consumer stopped; consuming again", "queue", queue, "err", err)
		if c.reconnect(ctx, conn) != nil {
			return nil // ctx ended
		}
	}
}

// reconnect waits, after a failure on lost, until the connection may be
// used again: lost itself if it is still open (only a channel failed), the
// one another Run opened meanwhile, or a new one from Redial, which it
// calls until one opens or ctx ends.
func (c *Consumer) reconnect(ctx context.Context, lost *amqp.Connection) error {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.conn != lost {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.cfg.RedialDelay):
		}
		if !lost.IsClosed() {
			return nil
		}
		conn, err := c.cfg.Redial(ctx)
		if err == nil {
			if err = c.use(conn); err != nil {
				_ = conn.Close()
			}
		}
		if err == nil {
			return nil
		}
		c.cfg.Logger.WarnContext(ctx, "rabbitmq redial", "err", err)
	}
}

// consume is one Run on conn: it returns nil when ctx ends, the failure
// when the channel or the connection fails.
func (c *Consumer) consume(ctx context.Context, conn *amqp.Connection, queue string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("idemamqp: open channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Qos(2*c.cfg.Workers, 0, false); err != nil {
		return fmt.Errorf("idemamqp: qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("idemamqp: consume %s: %w", queue, err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	work := make(chan amqp.Delivery)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for d := range work {
				// A delivery already taken is finished even as ctx ends: its
				// acknowledgement must follow its commit.
				if err := c.Handle(context.WithoutCancel(ctx), d); err != nil {
					c.cfg.Logger.WarnContext(ctx, "delivery", "routing_key", d.RoutingKey, "err", err)
				}
			}
		})
	}
	defer wg.Wait()
	defer close(work)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-closed:
			return fmt.Errorf("idemamqp: channel closed: %w", err)
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("idemamqp: deliveries ended: the channel or the connection closed")
			}
			select {
			case work <- d:
			case <-ctx.Done():
				_ = d.Nack(false, true)
				return nil
			}
		}
	}
}

// Handle processes one delivery and settles it: publish the answer, then
// acknowledge; or dead-letter, publish and acknowledge; or requeue after
// the back-off. The error is a failure to settle; the delivery then comes
// back, and its stored answer is replayed.
func (c *Consumer) Handle(ctx context.Context, d amqp.Delivery) error {
	m := Message(d)
	dec := c.c.Process(ctx, m)
	switch dec.Action {
	case consumer.Retry:
		time.AfterFunc(dec.Delay, func() {
			if err := d.Nack(false, true); err != nil {
				c.cfg.Logger.Warn("requeue", "routing_key", d.RoutingKey, "err", err)
			}
		})
		return nil
	case consumer.DeadLetter:
		if c.cfg.DeadLetterQueue == "" {
			c.publish(ctx, d, dec)
			return d.Nack(false, false)
		}
		dead := amqp.Publishing{Headers: table(c.c.DeadLetterHeader(m, dec)), Body: m.Body, DeliveryMode: amqp.Persistent, ContentType: d.ContentType, MessageId: d.MessageId}
		if err := c.send(ctx, c.cfg.DeadLetterQueue, dead); err != nil {
			// Not acknowledged: its redelivery, answered from the key's
			// record, tries again.
			return errors.Join(fmt.Errorf("dead-letter: %w", err), d.Nack(false, true))
		}
	}
	c.publish(ctx, d, dec)
	if err := d.Ack(false); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// publish sends the answer to the delivery's reply-to, when the
// consumer's ReplyPrefix allows it, and to the result queue
// (consumer.Answers), at most once each: a lost answer is published again on the
// message's redelivery, or read from the key's record.
func (c *Consumer) publish(ctx context.Context, d amqp.Delivery, dec consumer.Decision) {
	queues := c.c.Answers(dec, d.ReplyTo, c.cfg.ResultQueue)
	if len(queues) == 0 {
		return
	}
	h := c.c.ResultHeader(dec)
	out := amqp.Publishing{Headers: table(h), Body: dec.Result.Response.Body, ContentType: h.Get("Content-Type"), CorrelationId: d.CorrelationId, DeliveryMode: amqp.Persistent}
	for _, q := range queues {
		if err := c.send(ctx, q, out); err != nil {
			c.cfg.Logger.WarnContext(ctx, "publish answer", "queue", q, "err", err)
		}
	}
}

// send publishes msg to queue through the default exchange and waits for
// the broker's confirm.
func (c *Consumer) send(ctx context.Context, queue string, msg amqp.Publishing) error {
	c.mu.Lock()
	if c.pub.IsClosed() {
		// A channel error (the broker closes the channel, not the
		// connection) would otherwise fail every later publish; a lost
		// connection is Run's to dial again.
		pub, err := confirmChannel(c.pubConn)
		if err != nil {
			c.mu.Unlock()
			return err
		}
		c.pub = pub
	}
	dc, err := c.pub.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, msg)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return errors.New("the broker refused the message (nack)")
	}
	return nil
}

// Message is d as package consumer reads it, for a loop of one's own
// around consumer.Consumer.Process.
func Message(d amqp.Delivery) *consumer.Message {
	h := http.Header{}
	deliveries := 1
	for k, v := range d.Headers {
		switch v := v.(type) {
		case string:
			h.Add(k, v)
		case []byte:
			h.Add(k, string(v))
		case int64:
			if k == "x-delivery-count" {
				deliveries = int(v) + 1
			}
		case int32:
			if k == "x-delivery-count" {
				deliveries = int(v) + 1
			}
		}
	}
	if deliveries == 1 && d.Redelivered {
		deliveries = 2
	}
	return &consumer.Message{Subject: d.RoutingKey, Header: h, Body: d.Body, ID: d.MessageId, Deliveries: deliveries}
}

func table(h http.Header) amqp.Table {
	t := amqp.Table{}
	for k, v := range h {
		if len(v) > 0 {
			t[k] = v[0]
		}
	}
	return t
}
