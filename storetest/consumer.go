package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// Business is a store with a business table of its own: what a suite needs
// to see a handler's writes commit with its key, or not at all.
type Business struct {
	Store store.Store
	// WriteFunc inserts a row for key through ctx's transaction (the
	// store's DB accessor, such as pgstore.DB) and returns its id.
	WriteFunc func(ctx context.Context, key string) (int64, error)
	// CountFunc counts key's committed rows, outside any transaction.
	CountFunc func(ctx context.Context, key string) (int, error)
}

// NewBusinessFunc returns a Business on an empty key table and an empty
// business table that no other test uses.
type NewBusinessFunc func(t *testing.T) Business

// RunConsumer drives package consumer's Consumer through its Message, as
// a broker adapter does, on stores from newBusiness: what it decides
// (acknowledge, retry, dead-letter) and what has committed by then.
func RunConsumer(t *testing.T, newBusiness NewBusinessFunc) {
	ctx := context.Background()
	const retryDelay, maxRetryDelay = 10 * time.Millisecond, 40 * time.Millisecond

	t.Run("DuplicateDeliveryTakesEffectOnce", func(t *testing.T) {
		t.Parallel()
		c := newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{}, nil)
		m := c.message(newKey(), "pay 100")
		first := c.process(t, ctx, m)
		require.Equal(t, consumer.Ack, first.Action, "%v", first.Result.Err)
		require.Equal(t, idem.OutcomeExecuted, first.Result.Outcome)
		require.Empty(t, c.ResultHeader(first).Get(consumer.HeaderReplayed))

		// The broker redelivers it; the producer publishes it again, with a
		// message id of its own.
		redelivered, republished := *m, *m
		redelivered.Deliveries, republished.ID = 2, "another-id"
		for _, m := range []*consumer.Message{&redelivered, &republished} {
			d := c.process(t, ctx, m)
			require.Equal(t, consumer.Ack, d.Action, "acknowledged without running")
			require.Equal(t, idem.OutcomeReplayed, d.Result.Outcome)
			require.True(t, d.Result.Replayed)
			require.Equal(t, first.Result.Response.Body, d.Result.Response.Body, "the stored answer, byte for byte")
			h := c.ResultHeader(d)
			require.Equal(t, "true", h.Get(consumer.HeaderReplayed))
			require.Equal(t, "201", h.Get(consumer.HeaderStatus))
			require.Equal(t, string(idem.OutcomeReplayed), h.Get(consumer.HeaderOutcome))
			require.Equal(t, m.Header.Get(idem.DefaultHeader), h.Get(idem.DefaultHeader))
			require.Equal(t, "application/json", h.Get("Content-Type"), "the stored headers are published")
		}
		require.Equal(t, int32(1), c.runs.Load())
		require.Equal(t, 1, c.count(t, m))
	})

	t.Run("ConcurrentDuplicatesTakeEffectOnce", func(t *testing.T) {
		t.Parallel()
		c := newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{}, nil)
		m := c.message(newKey(), "pay 100")
		var (
			mu      sync.Mutex
			answers = map[string]int{}
		)
		race(t, func() error {
			for {
				d := c.Process(ctx, m)
				switch d.Action {
				case consumer.Ack:
					mu.Lock()
					answers[string(d.Result.Response.Body)]++
					mu.Unlock()
					return nil
				case consumer.Retry:
					continue // the key was in flight: redelivered
				}
				return fmt.Errorf("%s: %s: %v", d.Action, d.Result.Outcome, d.Result.Err)
			}
		})
		require.Len(t, answers, 1, "every delivery got the one answer")
		require.Equal(t, 1, c.count(t, m))
	})

	t.Run("AckOnlyAfterCommit", func(t *testing.T) {
		t.Parallel()
		var seen atomic.Int64 // the rows another connection saw while the handler ran
		seen.Store(-1)
		var c *consumerRig
		c = newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{}, func(ctx context.Context, m *consumer.Message) idem.Response {
			r := c.effect(ctx, m)
			n, err := c.biz.CountFunc(context.Background(), m.Header.Get(idem.DefaultHeader))
			if err != nil {
				return idem.Response{StatusCode: http.StatusInternalServerError}
			}
			seen.Store(int64(n))
			return r
		})
		m := c.message(newKey(), "pay 100")
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.Ack, d.Action, "%v", d.Result.Err)
		require.Equal(t, int64(0), seen.Load(), "the handler's write was not committed while it ran")
		require.Equal(t, 1, c.count(t, m), "committed when Process says Ack")
		rec, err := c.biz.Store.Get(ctx, consumer.DefaultScope, m.Header.Get(idem.DefaultHeader))
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status, "the key's completion committed with it")
		require.Equal(t, d.Result.Response.Body, rec.Response.Body)
	})

	t.Run("RetriableIsRetriedWithBackOff", func(t *testing.T) {
		t.Parallel()
		cfg := consumer.Config{RetryDelay: retryDelay, MaxRetryDelay: maxRetryDelay, MaxDeliveries: 5}
		var c *consumerRig
		c = newConsumerRig(t, newBusiness, idem.ModeAtomic, cfg, func(ctx context.Context, m *consumer.Message) idem.Response {
			r := c.effect(ctx, m) // written, then rolled back with the 503
			if m.Deliveries <= cfg.MaxDeliveries {
				return idem.Response{StatusCode: http.StatusServiceUnavailable}
			}
			return r
		})
		m := c.message(newKey(), "pay 100")
		for n, delay := range map[int]time.Duration{0: retryDelay, 1: retryDelay, 2: 2 * retryDelay, 3: maxRetryDelay, 4: maxRetryDelay} {
			m := *m
			m.Deliveries = n
			d := c.process(t, ctx, &m)
			require.Equal(t, consumer.Retry, d.Action, "delivery %d", n)
			require.Equal(t, delay, d.Delay, "delivery %d", n)
			require.Equal(t, idem.OutcomeFailed, d.Result.Outcome)
			require.Equal(t, http.StatusServiceUnavailable, d.Result.Response.StatusCode)
		}
		m.Deliveries = cfg.MaxDeliveries
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.DeadLetter, d.Action, "the last delivery of a message still failing")
		require.Equal(t, idem.OutcomeFailed, d.Result.Outcome)
		require.Equal(t, 0, c.count(t, m), "no failed delivery committed its write")
		// Its key was released: delivered again (say, from the dead
		// letters), it runs.
		m.Deliveries = cfg.MaxDeliveries + 1
		d = c.process(t, ctx, m)
		require.Equal(t, consumer.Ack, d.Action)
		require.Equal(t, idem.OutcomeExecuted, d.Result.Outcome)
		require.Equal(t, 1, c.count(t, m))
	})

	t.Run("PoisonIsStoredAndDeadLettered", func(t *testing.T) {
		t.Parallel()
		c := newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{}, nil)
		m := c.message(newKey(), "poison")
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.DeadLetter, d.Action)
		require.Equal(t, idem.OutcomeExecuted, d.Result.Outcome)
		require.Equal(t, http.StatusBadRequest, d.Result.Response.StatusCode)
		rec, err := c.biz.Store.Get(ctx, consumer.DefaultScope, m.Header.Get(idem.DefaultHeader))
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status, "a final failure is the key's answer")
		require.Equal(t, http.StatusBadRequest, rec.Response.StatusCode)

		h := c.DeadLetterHeader(m, d)
		require.Empty(t, h.Get("Authorization"), "credentials stay out of the dead letters")
		require.Equal(t, m.Subject, h.Get(consumer.HeaderDeadLetter))
		require.Equal(t, "400", h.Get(consumer.HeaderStatus))
		require.Equal(t, string(idem.OutcomeExecuted), h.Get(consumer.HeaderOutcome))
		require.Equal(t, m.Header.Get(idem.DefaultHeader), h.Get(idem.DefaultHeader))
		require.Equal(t, "Bearer secret", m.Header.Get("Authorization"), "the message itself is left alone")

		again := *m
		again.Deliveries = 2
		d = c.process(t, ctx, &again)
		require.Equal(t, consumer.DeadLetter, d.Action)
		require.True(t, d.Result.Replayed, "the stored failure, without running")
		require.Equal(t, int32(1), c.runs.Load())
	})

	t.Run("RefusedMessagesAreDeadLettered", func(t *testing.T) {
		t.Parallel()
		c := newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{}, nil)
		missing := c.message("", "pay 100")
		twoKeys := c.message("k1", "pay 100")
		twoKeys.Header.Add(idem.DefaultHeader, "k2")
		for name, m := range map[string]*consumer.Message{"NoKey": missing, "TwoKeys": twoKeys} {
			d := c.process(t, ctx, m)
			require.Equal(t, consumer.DeadLetter, d.Action, name)
			require.Equal(t, idem.OutcomeInvalidKey, d.Result.Outcome, name)
			require.Equal(t, http.StatusBadRequest, d.Result.Response.StatusCode, name)
		}
		key := newKey()
		require.Equal(t, consumer.Ack, c.process(t, ctx, c.message(key, "pay 100")).Action)
		d := c.process(t, ctx, c.message(key, "pay 200"))
		require.Equal(t, consumer.DeadLetter, d.Action, "a key reused with another body")
		require.Equal(t, idem.OutcomeKeyReused, d.Result.Outcome)
		require.Equal(t, http.StatusUnprocessableEntity, d.Result.Response.StatusCode)
		require.Equal(t, int32(1), c.runs.Load())
	})

	t.Run("KeyFromMessageID", func(t *testing.T) {
		t.Parallel()
		c := newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{KeyFromMessageID: true}, nil)
		m := c.message("", "pay 100")
		m.ID = newKey()
		require.Equal(t, consumer.Ack, c.process(t, ctx, m).Action)
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.Ack, d.Action)
		require.True(t, d.Result.Replayed)
		require.Equal(t, m.ID, d.Key)
		require.Equal(t, int32(1), c.runs.Load())
	})

	t.Run("Scope", func(t *testing.T) {
		t.Parallel()
		var userDown atomic.Bool
		cfg := consumer.Config{ScopeFunc: func(_ context.Context, m *consumer.Message) (string, error) {
			if userDown.Load() {
				return "", errors.New("the user store is down")
			}
			return m.Header.Get("X-User"), nil
		}}
		c := newConsumerRig(t, newBusiness, idem.ModeAtomic, cfg, nil)
		key := newKey()
		m := c.message(key, "pay 100")
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.DeadLetter, d.Action, "no user")
		require.Equal(t, idem.OutcomeScopeMissing, d.Result.Outcome)
		require.Equal(t, http.StatusUnauthorized, d.Result.Response.StatusCode)

		userDown.Store(true)
		d = c.process(t, ctx, m)
		require.Equal(t, consumer.Retry, d.Action, "the user store's failure is retried")
		require.Equal(t, idem.OutcomeStoreUnavailable, d.Result.Outcome)
		userDown.Store(false)

		for _, user := range []string{"alice", "bob"} {
			m := c.message(key, "pay 100")
			m.Header.Set("X-User", user)
			d := c.process(t, ctx, m)
			require.Equal(t, consumer.Ack, d.Action, user)
			require.False(t, d.Result.Replayed, "keys are scoped by user: %s's is its own", user)
		}
		require.Equal(t, 2, c.count(t, m))
	})

	t.Run("PanicIsRetried", func(t *testing.T) {
		t.Parallel()
		var c *consumerRig
		c = newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{RetryDelay: retryDelay, MaxRetryDelay: maxRetryDelay}, func(ctx context.Context, m *consumer.Message) idem.Response {
			r := c.effect(ctx, m)
			if m.Deliveries == 1 {
				panic("handler bug")
			}
			return r
		})
		m := c.message(newKey(), "pay 100")
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.Retry, d.Action, "one poison message does not stop the consumer")
		require.Equal(t, retryDelay, d.Delay)
		require.Equal(t, idem.OutcomeAbandoned, d.Result.Outcome)
		require.ErrorContains(t, d.Result.Err, "handler bug")
		require.Equal(t, 0, c.count(t, m), "rolled back")
		m.Deliveries = 2
		d = c.process(t, ctx, m)
		require.Equal(t, consumer.Ack, d.Action, "the key was released")
		require.Equal(t, idem.OutcomeExecuted, d.Result.Outcome)
		require.Equal(t, 1, c.count(t, m))
	})

	t.Run("ShutdownBeforeCommitRetriesAtOnce", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var c *consumerRig
		c = newConsumerRig(t, newBusiness, idem.ModeAtomic, consumer.Config{}, func(hctx context.Context, m *consumer.Message) idem.Response {
			r := c.effect(hctx, m)
			cancel() // the consumer shuts down while the handler works
			return r
		})
		m := c.message(newKey(), "pay 100")
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.Retry, d.Action)
		require.Zero(t, d.Delay, "handed to another consumer at once")
		require.Equal(t, idem.OutcomeAbandoned, d.Result.Outcome)
		require.Equal(t, 0, c.count(t, m), "nothing committed: not acknowledged")
	})

	t.Run("InFlightIsRetried", func(t *testing.T) {
		t.Parallel()
		entered, release := make(chan struct{}), make(chan struct{})
		var c *consumerRig
		c = newConsumerRig(t, newBusiness, idem.ModeLeased, consumer.Config{RetryDelay: retryDelay, MaxRetryDelay: maxRetryDelay}, func(ctx context.Context, m *consumer.Message) idem.Response {
			if c.runs.Load() == 1 {
				close(entered)
				<-release
			}
			return c.effect(ctx, m)
		})
		m := c.message(newKey(), "pay 100")
		done := make(chan consumer.Decision, 1)
		go func() { done <- c.Process(ctx, m) }()
		<-entered
		d := c.process(t, ctx, m)
		require.Equal(t, consumer.Retry, d.Action, "another consumer holds the key")
		require.Equal(t, idem.OutcomeInFlight, d.Result.Outcome)
		require.Equal(t, retryDelay, d.Delay)
		close(release)
		require.Equal(t, consumer.Ack, (<-done).Action)
		d = c.process(t, ctx, m)
		require.Equal(t, consumer.Ack, d.Action)
		require.True(t, d.Result.Replayed)
		require.Equal(t, int32(1), c.runs.Load())
		require.Equal(t, 1, c.count(t, m))
	})
}

// consumerRig is a Consumer under test and the Business it writes to.
type consumerRig struct {
	*consumer.Consumer
	biz  Business
	runs atomic.Int32 // the handler's runs
}

// newConsumerRig returns a consumer in mode on a fresh Business. Its
// handler counts its runs and calls h; by default (h nil) a body "poison"
// is a final failure (400), and anything else writes an effect (201).
func newConsumerRig(t *testing.T, newBusiness NewBusinessFunc, mode idem.Mode, cfg consumer.Config, h consumer.HandlerFunc) *consumerRig {
	t.Helper()
	c := &consumerRig{biz: newBusiness(t)}
	if h == nil {
		h = func(ctx context.Context, m *consumer.Message) idem.Response {
			if string(m.Body) == "poison" {
				return idem.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"poison"}`)}
			}
			return c.effect(ctx, m)
		}
	}
	mw, err := idem.New(c.biz.Store, idem.Config{Mode: mode})
	require.NoError(t, err)
	c.Consumer, err = consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		c.runs.Add(1)
		return h(ctx, m)
	}, cfg)
	require.NoError(t, err)
	return c
}

// effect writes one row for the message's key in its transaction and
// answers 201 with the row's id.
func (c *consumerRig) effect(ctx context.Context, m *consumer.Message) idem.Response {
	id, err := c.biz.WriteFunc(ctx, idem.KeyFromContext(ctx))
	if err != nil {
		return idem.Response{StatusCode: http.StatusInternalServerError}
	}
	return idem.Response{StatusCode: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"subject":` + strconv.Quote(m.Subject) + `,"id":` + strconv.FormatInt(id, 10) + `}`)}
}

// message is a delivery of body with key ("" for none) and credentials.
func (c *consumerRig) message(key, body string) *consumer.Message {
	h := http.Header{"Authorization": {"Bearer secret"}}
	if key != "" {
		h.Set(idem.DefaultHeader, key)
	}
	return &consumer.Message{Subject: "payments.commands", Header: h, Body: []byte(body), ID: newKey(), Deliveries: 1}
}

// process processes m and checks the decision's key: the key header as
// received, its values joined.
func (c *consumerRig) process(t *testing.T, ctx context.Context, m *consumer.Message) consumer.Decision {
	t.Helper()
	d := c.Process(ctx, m)
	if v := m.Header.Values(idem.DefaultHeader); len(v) > 0 {
		require.Equal(t, strings.Join(v, ","), d.Key)
	}
	return d
}

// count is how many rows the message's key committed.
func (c *consumerRig) count(t *testing.T, m *consumer.Message) int {
	t.Helper()
	key := m.Header.Get(idem.DefaultHeader)
	if key == "" {
		key = m.ID
	}
	n, err := c.biz.CountFunc(context.Background(), key)
	require.NoError(t, err)
	return n
}
