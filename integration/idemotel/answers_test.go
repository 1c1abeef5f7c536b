package idemotel_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
)

// gate is a handler that hands the test a channel for each call, holds the
// call until the test closes it or the call's context ends, then answers
// 201.
type gate chan chan struct{}

func (g gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	release := make(chan struct{})
	g <- release
	select {
	case <-release:
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusCreated)
}

// requireAnswer asserts that a span of op ended with result, and that no
// span, of a request or an operation, is a span error.
func (f *fixture) requireAnswer(t *testing.T, op, result string) {
	t.Helper()
	var seen bool
	for _, s := range f.spans.Ended() {
		require.Equal(t, codes.Unset, s.Status().Code, "span %s (%v) is an error", s.Name(), attrs(s)["idem.result"].AsString())
		if s.Name() == op && attrs(s)["idem.result"].AsString() == result {
			seen = true
		}
	}
	require.True(t, seen, "no %s span with idem.result %s", op, result)
}

// A bounded wait that ran out, a key found recorded, a lease another
// attempt took: the store's answers, which the middleware turns into a
// 409 or a replay, are results of their spans, never span errors (an
// alert on span errors fires on failures only).
func TestAnswersAreNotSpanErrors(t *testing.T) {
	t.Parallel()

	t.Run("WaitTimeout", func(t *testing.T) {
		t.Parallel()
		g := make(gate, 4)
		f := newFixtureWith(t, idem.Config{Mode: idem.ModeAtomic, WaitTimeout: 200 * time.Millisecond}, g)
		// Another transaction holds the key's lock, as a claim-first
		// request's does from its handler's first statement on
		// (store.Capabilities.KeyLock).
		ctx := context.Background()
		tx, err := f.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(length($2) || ':' || $2 || $3, hashtextextended($1, 0)))`, "idempotency_keys", "alice", "k1")
		require.NoError(t, err)
		waited := f.postAsync(t, "k1", `{}`)
		close(<-g) // its handler writes nothing: the lock goes with the completion
		require.Equal(t, http.StatusConflict, <-waited, "the claim waited 200ms for the lock, then answered 409")
		// The deferred claim's result is reported as an insert's.
		f.requireAnswer(t, "idem.insert", "wait_timeout")
	})

	t.Run("KeyExists", func(t *testing.T) {
		t.Parallel()
		g := make(gate, 4)
		f := newFixtureWith(t, idem.Config{Mode: idem.ModeAtomicDeferred}, g)
		first := f.postAsync(t, "k1", `{}`)
		releaseFirst := <-g
		second := f.replica().postAsync(t, "k1", `{}`)
		releaseSecond := <-g // both run on two replicas: a deferred claim runs at the completion
		close(releaseFirst)
		require.Equal(t, http.StatusCreated, <-first)
		close(releaseSecond)
		require.Equal(t, http.StatusCreated, <-second, "the second's claim found the key recorded: a replay")
		f.requireAnswer(t, "idem.insert", "key_exists")
	})

	t.Run("LeaseLost", func(t *testing.T) {
		t.Parallel()
		g := make(gate, 4)
		f := newFixtureWith(t, idem.Config{Mode: idem.ModeLeased, LeaseDuration: 300 * time.Millisecond}, g)
		first := f.postAsync(t, "k1", `{}`)
		<-g // the handler runs; its lease is renewed every 100ms
		// Another attempt takes the key: the next renewal is fenced off.
		_, err := f.pool.Exec(context.Background(), `UPDATE idempotency_keys SET fencing_token = gen_random_uuid()`)
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, <-first, "lease lost")
		f.requireAnswer(t, "idem.renew", "not_held")
		reqs := f.requestSpans()
		require.Len(t, reqs, 1)
		require.Equal(t, string(idem.OutcomeLeaseLost), attrs(reqs[0])["idem.outcome"].AsString())

		fencing, ok := collect(t, f.reader)["idem.fencing.rejections"].(metricdata.Sum[int64])
		require.True(t, ok, "idem.fencing.rejections is an int64 sum")
		byOp := map[string]int64{}
		for _, dp := range fencing.DataPoints {
			op, _ := dp.Attributes.Value("idem.operation")
			byOp[op.AsString()] += dp.Value
		}
		require.Equal(t, int64(1), byOp[string(idem.OpRenew)], "fencing rejections by operation: %v", byOp)
	})
}
