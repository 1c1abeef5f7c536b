// Package consumer turns a queue's at-least-once delivery into one effect
// per key, with the same store, state machine and promise as the HTTP
// middleware: it is the broker-independent half of a queue consumer, and
// the adapters (idemnats for NATS JetStream, idemamqp for RabbitMQ) are the
// other half.
//
// A message carries its key in a header the producer sets (the broker's
// message id only as an opt-in fallback: a producer's retry gets a new id).
// Process runs the handler through [idem.Middleware.Do]; in atomic mode its
// writes and the key's completion commit in one transaction, and the
// [Decision] it returns says what the adapter does next: acknowledge (after
// that commit), retry later, or dead-letter. A redelivery of a completed
// message is acknowledged without running the handler, with the stored
// response to re-publish. docs/queues.md walks through it.
package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// Message is one delivery as an adapter presents it.
type Message struct {
	// Subject is where it was published: the NATS subject, the AMQP
	// routing key. The default fingerprint covers it.
	Subject string
	// Header holds the message's headers, keys in canonical form.
	Header http.Header
	Body   []byte
	// ID is the broker's message id (Nats-Msg-Id, AMQP message-id); it is
	// the key only with Config.KeyFromMessageID.
	ID string
	// Deliveries counts this message's deliveries, this one included; 0
	// when the broker does not say, taken as 1.
	Deliveries int
}

// HandlerFunc handles one message. ctx carries the store's transaction
// (pgstore.DB), the key (idem.KeyFromContext) and the scope
// (idem.ScopeFromContext). Its idem.Response is in HTTP's
// terms: 2xx and 3xx are done; other 4xx but 408 and 429 are final failures,
// stored and dead-lettered; 5xx, 408 and 429 are retried.
type HandlerFunc func(ctx context.Context, m *Message) idem.Response

// Config configures a Consumer. Its zero value is valid.
type Config struct {
	// Header is the message header that carries the key. Default
	// idem.DefaultHeader ("Idempotency-Key").
	Header string
	// KeyFromMessageID uses the broker's message id as the key of a
	// message without the header. Default false: a producer that retries
	// a publish gets a new id, so only a key it chose survives its retries.
	KeyFromMessageID bool
	// ScopeFunc says whose message it is; every key is scoped by it, as an
	// HTTP request's is. An error (the user store is down, say) retries
	// the message; an empty scope dead-letters it with 401. Default: every
	// message in the scope DefaultScope.
	ScopeFunc func(ctx context.Context, m *Message) (string, error)
	// FingerprintFunc fingerprints a message: a key reused with another
	// fingerprint is answered 422. An error dead-letters the message with
	// 400. Default Fingerprint (the subject and the body's bytes).
	FingerprintFunc func(m *Message) (store.Fingerprint, error)
	// RetryDelay is the back-off before the second delivery of a message
	// that failed retriably; it doubles with each delivery. Default 1s.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off. Default 1m.
	MaxRetryDelay time.Duration
	// MaxDeliveries is how many times a message that keeps failing
	// retriably (5xx, store down, key in flight) is delivered; the last
	// failure dead-letters it, its key freed. Default 10.
	MaxDeliveries int
	// ReplyPrefix is where a producer may have its answers sent: the reply
	// subject or queue a message names (NATS Reply-To, AMQP reply-to) is
	// used only when it begins with ReplyPrefix, so that nobody can have an
	// answer published into a command subject, or anywhere else. Default
	// "": no message's reply destination is used (see Answers).
	ReplyPrefix string
}

// Defaults of Config.
const (
	DefaultScope         = "consumer"
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = time.Minute
	DefaultMaxDeliveries = 10
)

// Action is what an adapter does with a message once it is processed.
type Action int

const (
	// Ack acknowledges it: its response (executed or replayed) is final and
	// committed. Publish the response, then acknowledge.
	Ack Action = iota
	// Retry negatively acknowledges it, to be redelivered after
	// Decision.Delay: nothing it did was committed.
	Retry
	// DeadLetter sends it to the dead-letter destination, then
	// acknowledges it: it failed for good, and its key holds that final
	// answer when one was stored.
	DeadLetter
)

func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case DeadLetter:
		return "dead-letter"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Decision is what Process decided for a message.
type Decision struct {
	Action Action
	// Delay is the back-off before a Retry's redelivery.
	Delay time.Duration
	// Key is the message's key as received ("" without one).
	Key string
	// Result is how Do answered; Result.Response is the answer to publish
	// (nil when the work was abandoned).
	Result idem.Result
}

// Result headers: a published result carries the response's status, its
// stored headers and, for a replay, Idempotent-Replayed: true.
const (
	HeaderStatus     = "Idem-Status"
	HeaderOutcome    = "Idem-Outcome"
	HeaderReplayed   = "Idempotent-Replayed"
	HeaderDeadLetter = "Idem-Dead-Letter"
)

// Consumer processes messages once per key.
type Consumer struct {
	mw     *idem.Middleware
	handle HandlerFunc
	cfg    Config
}

// New returns a Consumer that runs h through mw. It fails on an invalid
// Config.
func New(mw *idem.Middleware, h HandlerFunc, cfg Config) (*Consumer, error) {
	if mw == nil || h == nil {
		return nil, errors.New("consumer: New needs a middleware and a handler")
	}
	if cfg.Header == "" {
		cfg.Header = idem.DefaultHeader
	}
	cfg.Header = http.CanonicalHeaderKey(cfg.Header)
	if cfg.ScopeFunc == nil {
		cfg.ScopeFunc = func(context.Context, *Message) (string, error) { return DefaultScope, nil }
	}
	if cfg.FingerprintFunc == nil {
		cfg.FingerprintFunc = Fingerprint
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.MaxRetryDelay == 0 {
		cfg.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if cfg.MaxDeliveries == 0 {
		cfg.MaxDeliveries = DefaultMaxDeliveries
	}
	switch {
	case cfg.RetryDelay < 0 || cfg.MaxRetryDelay < cfg.RetryDelay:
		return nil, fmt.Errorf("consumer: want 0 < RetryDelay <= MaxRetryDelay, got %v and %v", cfg.RetryDelay, cfg.MaxRetryDelay)
	case cfg.MaxDeliveries < 1:
		return nil, fmt.Errorf("consumer: MaxDeliveries must be positive, got %d", cfg.MaxDeliveries)
	}
	return &Consumer{mw: mw, handle: h, cfg: cfg}, nil
}

// Config returns the configuration in force, defaults filled in.
func (c *Consumer) Config() Config { return c.cfg }

// Process runs one message once for its key and says what to do with it.
// Acknowledge only after it returns: the handler's writes and the key's
// completion have committed by then (atomic mode).
func (c *Consumer) Process(ctx context.Context, m *Message) Decision {
	key := c.key(m)
	scope, err := c.cfg.ScopeFunc(ctx, m)
	if err != nil {
		return c.retry(m, Decision{Key: key, Result: idem.Result{Outcome: idem.OutcomeStoreUnavailable, Err: fmt.Errorf("scope: %w", err)}})
	}
	fp, err := c.cfg.FingerprintFunc(m)
	if err != nil {
		resp := c.mw.ProblemResponse(idem.ProblemBodyInvalid, http.StatusBadRequest, "The message body cannot be fingerprinted: "+err.Error()+".")
		return Decision{Action: DeadLetter, Key: key, Result: idem.Result{Outcome: idem.OutcomeInvalidBody, Response: &resp, Err: err}}
	}
	call := idem.Call{Scope: scope, Key: key, Fingerprint: fp, Method: "MESSAGE", Route: m.Subject}
	res := c.do(idem.WithScope(ctx, scope), call, m)
	d := Decision{Key: key, Result: res}
	switch res.Outcome {
	case idem.OutcomeExecuted, idem.OutcomeReplayed:
		if res.Response.StatusCode < 400 {
			return d // Ack
		}
		d.Action = DeadLetter // a final failure, stored
	case idem.OutcomeKeyReused, idem.OutcomeInvalidKey, idem.OutcomeInvalidBody, idem.OutcomeScopeMissing:
		d.Action = DeadLetter // no delivery of it will ever do better
	case idem.OutcomeAbandoned:
		if ctx.Err() != nil {
			return Decision{Action: Retry, Key: key, Result: res} // shutting down: at once, to another consumer
		}
		return c.retry(m, d) // the handler panicked
	default: // failed, in flight, lease lost, store error
		return c.retry(m, d)
	}
	return d
}

// do runs Do, turning a panic in the handler (re-raised by Do once the key
// is released) into an abandoned result, so one poison message cannot
// stop the consumer.
func (c *Consumer) do(ctx context.Context, call idem.Call, m *Message) (res idem.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = idem.Result{Outcome: idem.OutcomeAbandoned, Err: fmt.Errorf("handler panicked: %v", p)}
		}
	}()
	return c.mw.Do(ctx, call, func(ctx context.Context) idem.Response { return c.handle(ctx, m) })
}

// retry backs a retriable failure off exponentially, or dead-letters it at
// its last delivery.
func (c *Consumer) retry(m *Message, d Decision) Decision {
	n := max(m.Deliveries, 1)
	if n >= c.cfg.MaxDeliveries {
		d.Action = DeadLetter
		return d
	}
	delay := c.cfg.RetryDelay
	for i := 1; i < n && delay < c.cfg.MaxRetryDelay; i++ {
		delay *= 2
	}
	d.Action, d.Delay = Retry, min(delay, c.cfg.MaxRetryDelay)
	return d
}

// Answers returns where an adapter publishes d's answer: replyTo, the
// destination the message names, when it is under Config.ReplyPrefix, and
// result, the adapter's result destination, each when not "". A message
// without a scope (401) is answered nowhere: whoever sent it learns nothing,
// and its dead letter is its only trace.
func (c *Consumer) Answers(d Decision, replyTo, result string) []string {
	if d.Result.Response == nil || d.Result.Outcome == idem.OutcomeScopeMissing {
		return nil
	}
	var out []string
	if c.cfg.ReplyPrefix != "" && len(replyTo) > len(c.cfg.ReplyPrefix) && strings.HasPrefix(replyTo, c.cfg.ReplyPrefix) &&
		!strings.ContainsAny(replyTo, "*> \t\r\n") {
		out = append(out, replyTo)
	}
	if result != "" {
		out = append(out, result)
	}
	return out
}

// key is the message's key as received, or its id with KeyFromMessageID.
// Several values are joined as a list, which the key parser refuses.
func (c *Consumer) key(m *Message) string {
	v := m.Header.Values(c.cfg.Header)
	if len(v) == 0 && c.cfg.KeyFromMessageID {
		return m.ID
	}
	return strings.Join(v, ",")
}

// ResultHeader is the header of the message that publishes d's response:
// the response's own headers, its status, the outcome, the key, and
// Idempotent-Replayed: true for a replay.
func (c *Consumer) ResultHeader(d Decision) http.Header {
	h := http.Header{}
	if r := d.Result.Response; r != nil {
		for k, v := range r.Header {
			h[k] = append([]string(nil), v...)
		}
		h.Set(HeaderStatus, strconv.Itoa(r.StatusCode))
	}
	h.Set(HeaderOutcome, string(d.Result.Outcome))
	if d.Key != "" {
		h.Set(c.cfg.Header, d.Key)
	}
	if d.Result.Replayed {
		h.Set(HeaderReplayed, "true")
	}
	return h
}

// DeadLetterHeader is the header of the dead-lettered copy of m: its own
// headers but credentials, and why it was dead-lettered.
func (c *Consumer) DeadLetterHeader(m *Message, d Decision) http.Header {
	h := m.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		h.Del(k)
	}
	h.Set(HeaderOutcome, string(d.Result.Outcome))
	if r := d.Result.Response; r != nil {
		h.Set(HeaderStatus, strconv.Itoa(r.StatusCode))
	}
	h.Set(HeaderDeadLetter, m.Subject)
	return h
}

// Fingerprint is the default fingerprint of a message: SHA-256 over
// length-prefixed fields (a version tag, the subject, the body's bytes),
// recorded as method MESSAGE on the subject.
func Fingerprint(m *Message) (store.Fingerprint, error) {
	h := sha256.New()
	for _, field := range [][]byte{[]byte("idem-message-v1"), []byte(m.Subject), m.Body} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write(field)
	}
	return store.Fingerprint{Version: idem.FingerprintVersion, Method: "MESSAGE", Path: m.Subject, Hash: h.Sum(nil)}, nil
}
