package pgstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

type spanKey struct{}

// recorder is a TraceFunc that records each operation and its result, and
// puts the operation's name in its context as a tracer would put a span.
type recorder struct {
	mu  sync.Mutex
	ops []string
}

func (r *recorder) trace(ctx context.Context, op idem.Op) (context.Context, func(error)) {
	return context.WithValue(ctx, spanKey{}, string(op)), func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case errors.Is(err, store.ErrNotFound):
			op += ":not_found"
		case err != nil:
			op += ":error"
		}
		r.ops = append(r.ops, string(op))
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

// queryTracer is a pgx tracer that records which span each query ran under.
type queryTracer struct {
	mu    sync.Mutex
	spans []string
}

func (q *queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	span, _ := ctx.Value(spanKey{}).(string)
	q.mu.Lock()
	q.spans = append(q.spans, span)
	q.mu.Unlock()
	return ctx
}

func (q *queryTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// tracedStore returns a migrated store whose pool reports the span of
// every query.
func tracedStore(t *testing.T) (*pgstore.Store, *queryTracer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(t, pgtest.Schema(t)))
	require.NoError(t, err)
	qt := &queryTracer{}
	cfg.ConnConfig.Tracer = qt
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	migrate(t, pool)
	qt.spans = nil
	return pgstore.New(pool), qt
}

func keyed(key, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	return req.WithContext(idem.WithScope(req.Context(), "alice"))
}

func TestTraceFunc(t *testing.T) {
	t.Parallel()
	created := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })

	t.Run("SeesEveryStoreOperation", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			mode idem.Mode
			want []string
		}{
			{idem.ModeLeased, []string{"get:not_found", "insert", "begin", "complete", "commit"}},
			// Claim first by the key's lock: the lock and its check go
			// with the handler's first statement (none here: with the
			// completion), then the record's insert, reported when it
			// has run with the completion.
			{idem.ModeAtomic, []string{"get:not_found", "begin", "insert", "complete", "commit"}},
		} {
			st, _ := tracedStore(t)
			rec := &recorder{}
			mw, err := idem.New(st, idem.Config{Mode: tc.mode, TraceFunc: rec.trace, ReplayCacheBytes: -1})
			require.NoError(t, err)
			h := mw.Require(created)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, keyed("k1", `{}`))
			require.Equal(t, http.StatusCreated, w.Code)
			require.Equal(t, tc.want, rec.take(), "%v; a Rollback after Commit is not reported", tc.mode)

			w = httptest.NewRecorder()
			h.ServeHTTP(w, keyed("k1", `{}`))
			require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			require.Equal(t, []string{"get"}, rec.take(), "a replay is one read")
		}
	})

	t.Run("ItsContextReachesTheDriver", func(t *testing.T) {
		t.Parallel()
		st, qt := tracedStore(t)
		rec := &recorder{}
		mw, err := idem.New(st, idem.Config{TraceFunc: rec.trace, ReplayCacheBytes: -1})
		require.NoError(t, err)
		w := httptest.NewRecorder()
		mw.Require(created).ServeHTTP(w, keyed("k1", `{}`))
		require.Equal(t, http.StatusCreated, w.Code)
		qt.mu.Lock()
		defer qt.mu.Unlock()
		require.NotEmpty(t, qt.spans)
		for _, span := range qt.spans {
			require.NotEmpty(t, span, "every query runs under the span of its store operation: %v", qt.spans)
		}
	})

	t.Run("TraceAllNestsAndEndsInReverse", func(t *testing.T) {
		t.Parallel()
		var calls []string
		tracer := func(name string) idem.TraceFunc {
			return func(ctx context.Context, op idem.Op) (context.Context, func(error)) {
				parent, _ := ctx.Value(spanKey{}).(string)
				calls = append(calls, "start "+name+" under "+parent)
				return context.WithValue(ctx, spanKey{}, name), func(error) { calls = append(calls, "end "+name) }
			}
		}
		trace := idem.TraceAll(tracer("a"), nil, tracer("b"))
		ctx, end := trace(context.Background(), idem.OpGet)
		end(nil)
		require.Equal(t, "b", ctx.Value(spanKey{}))
		require.Equal(t, []string{"start a under ", "start b under a", "end b", "end a"}, calls)
		require.Nil(t, idem.TraceAll())
	})

	t.Run("ObserveAllCallsEach", func(t *testing.T) {
		t.Parallel()
		var got []string
		observe := idem.ObserveAll(
			func(e idem.Event) { got = append(got, "a:"+e.Key) }, nil,
			func(e idem.Event) { got = append(got, "b:"+e.Key) })
		observe(idem.Event{Key: "k"})
		require.Equal(t, []string{"a:k", "b:k"}, got)
		require.Nil(t, idem.ObserveAll(nil))
	})
}
