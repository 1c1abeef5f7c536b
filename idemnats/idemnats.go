// Package idemnats consumes NATS JetStream messages once per key: the
// JetStream adapter of package consumer (docs/queues.md).
//
// A message is acknowledged only after its handler's writes and its key's
// completion committed; a redelivery of a completed message is
// acknowledged without running the handler, and its stored reply is
// published again; a retriable failure is negatively acknowledged with
// back-off (NakWithDelay); a final failure is published to the dead-letter
// subject and terminated, never redelivered.
//
// JetStream keeps no reply subject of its own through a stream: a producer
// that wants the answer names a subject in the Reply-To header, under the
// consumer's consumer.Config.ReplyPrefix.
package idemnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/consumer"
)

// HeaderReplyTo names the subject a producer wants the message's answer
// published to.
const HeaderReplyTo = "Reply-To"

// Config configures a Consumer. Its zero value is valid.
type Config struct {
	// ResultSubject, when set, receives every answer (executed, replayed
	// or refused) but a 401's, besides the message's Reply-To. Default
	// none.
	ResultSubject string
	// DeadLetterSubject receives, through JetStream, a copy of every
	// message that failed for good (without its Authorization header); a
	// stream must capture the subject. Default none: such a message is only
	// terminated, its answer published as any other.
	DeadLetterSubject string
	// Workers is how many messages are processed at once. Default 1.
	Workers int
	// Logger receives the failures to publish, acknowledge or dead-letter,
	// never a body. Default slog.Default().
	Logger *slog.Logger
}

// Consumer processes a JetStream consumer's messages with a
// consumer.Consumer.
type Consumer struct {
	c   *consumer.Consumer
	js  jetstream.JetStream
	cfg Config
}

// New returns a Consumer that processes messages with c and publishes
// through js. It fails on an invalid Config.
func New(c *consumer.Consumer, js jetstream.JetStream, cfg Config) (*Consumer, error) {
	if c == nil || js == nil {
		return nil, errors.New("idemnats: New needs a consumer and a JetStream")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("idemnats: Workers must be positive, got %d", cfg.Workers)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Consumer{c: c, js: js, cfg: cfg}, nil
}

// Run consumes cons until ctx ends, then lets the messages being processed
// finish (their commits and acknowledgements) and returns.
func (c *Consumer) Run(ctx context.Context, cons jetstream.Consumer) error {
	msgs := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for msg := range msgs {
				// A message already taken is finished even as ctx ends: its
				// acknowledgement must follow its commit.
				if err := c.Handle(context.WithoutCancel(ctx), msg); err != nil {
					c.cfg.Logger.WarnContext(ctx, "message", "subject", msg.Subject(), "err", err)
				}
			}
		})
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case msgs <- msg:
		case <-ctx.Done(): // not taken: JetStream redelivers it after AckWait
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		c.cfg.Logger.WarnContext(ctx, "jetstream consume", "err", err)
	}))
	if err != nil {
		close(msgs)
		wg.Wait()
		return fmt.Errorf("idemnats: consume: %w", err)
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	close(msgs)
	wg.Wait()
	return nil
}

// Handle processes one message and settles it with the broker: publish the
// answer, then acknowledge; or dead-letter, publish and terminate; or
// negatively acknowledge with the back-off. The error is a failure to
// settle; the message is then redelivered and its stored answer replayed.
func (c *Consumer) Handle(ctx context.Context, msg jetstream.Msg) error {
	m := Message(msg)
	d := c.c.Process(ctx, m)
	switch d.Action {
	case consumer.Retry:
		if err := msg.NakWithDelay(d.Delay); err != nil {
			return fmt.Errorf("nak: %w", err)
		}
		return nil
	case consumer.DeadLetter:
		if c.cfg.DeadLetterSubject != "" {
			dead := &nats.Msg{Subject: c.cfg.DeadLetterSubject, Header: nats.Header(c.c.DeadLetterHeader(m, d)), Data: m.Body}
			if _, err := c.js.PublishMsg(ctx, dead); err != nil {
				// Not terminated: its redelivery, answered from the key's
				// record, tries again.
				return errors.Join(fmt.Errorf("dead-letter: %w", err), msg.NakWithDelay(c.c.Config().RetryDelay))
			}
		}
		c.publish(ctx, m, d)
		if err := msg.TermWithReason(string(d.Result.Outcome)); err != nil {
			return fmt.Errorf("term: %w", err)
		}
		return nil
	}
	c.publish(ctx, m, d)
	if err := msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// publish sends the answer to the message's Reply-To, when the consumer's
// ReplyPrefix allows it, and to the result subject (consumer.Answers), at
// most once each: a lost answer is published again on the message's
// redelivery, or read from the key's record.
func (c *Consumer) publish(ctx context.Context, m *consumer.Message, d consumer.Decision) {
	nc := c.js.Conn()
	for _, subj := range c.c.Answers(d, m.Header.Get(HeaderReplyTo), c.cfg.ResultSubject) {
		out := &nats.Msg{Subject: subj, Header: nats.Header(c.c.ResultHeader(d)), Data: d.Result.Response.Body}
		if err := nc.PublishMsg(out); err != nil {
			c.cfg.Logger.WarnContext(ctx, "publish answer", "subject", subj, "err", err)
		}
	}
}

// Message is msg as package consumer reads it, for a loop of one's own
// around consumer.Consumer.Process.
func Message(msg jetstream.Msg) *consumer.Message {
	h := http.Header{}
	for k, v := range msg.Headers() {
		h[http.CanonicalHeaderKey(k)] = v
	}
	m := &consumer.Message{Subject: msg.Subject(), Header: h, Body: msg.Data(), ID: h.Get(jetstream.MsgIDHeader)}
	if md, err := msg.Metadata(); err == nil {
		m.Deliveries = int(md.NumDelivered)
	}
	return m
}
