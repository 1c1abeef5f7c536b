package idemotel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemotel"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

// fixture is the middleware on a real PostgreSQL behind a real HTTP
// server, traced and measured by the OpenTelemetry SDK into memory.
type fixture struct {
	url string
	// other is a second replica's: a middleware of its own on the same
	// store and telemetry, as another process would be (in one process a
	// duplicate waits for the first before the store sees it).
	other  string
	pool   *pgxpool.Pool
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newFixture(t *testing.T, mode idem.Mode) *fixture {
	// Without the replay cache: every request reads its key first, and
	// the tests see that read's span.
	return newFixtureWith(t, idem.Config{Mode: mode, ReplayCacheBytes: -1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"p1"}`))
	}))
}

// newFixtureWith serves h on POST /v1/payments behind the middleware in
// cfg, telemetry plugged in.
func newFixtureWith(t *testing.T, cfg idem.Config, h http.Handler) *fixture {
	t.Helper()
	pool := pgtest.Pool(t, 4)
	_, err := pgstore.Migrate(context.Background(), pool)
	require.NoError(t, err)
	f := &fixture{pool: pool, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tel, err := idemotel.New(idemotel.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader)),
	})
	require.NoError(t, err)
	cfg.StartFunc, cfg.TraceFunc, cfg.ObserveFunc = tel.Start, tel.Trace, tel.Observe
	for _, url := range []*string{&f.url, &f.other} {
		mw, err := idem.New(pgstore.New(pool), cfg)
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments", mw.Require(h))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mux.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
		}))
		t.Cleanup(srv.Close)
		*url = srv.URL
	}
	return f
}

// replica is f seen through its second replica.
func (f *fixture) replica() *fixture {
	r := *f
	r.url = f.other
	return &r
}

func (f *fixture) post(t *testing.T, key, body string) int {
	t.Helper()
	code, err := f.send(key, body)
	require.NoError(t, err)
	return code
}

// postAsync posts from a goroutine of its own and delivers the status.
func (f *fixture) postAsync(t *testing.T, key, body string) <-chan int {
	t.Helper()
	out := make(chan int, 1)
	go func() {
		code, err := f.send(key, body)
		if err != nil {
			t.Errorf("post %s: %v", key, err)
		}
		out <- code
	}()
	return out
}

func (f *fixture) send(key, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, f.url+"/v1/payments", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// requestSpans returns the ended idem.request spans. The middleware ends
// one before its response leaves the handler.
func (f *fixture) requestSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if s.Name() == "idem.request" {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestSpans(t *testing.T) {
	t.Parallel()
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, mode)
			require.Equal(t, http.StatusCreated, f.post(t, "k1", `{"amount":1}`))
			require.Equal(t, http.StatusCreated, f.post(t, "k1", `{"amount":1}`))
			require.Equal(t, http.StatusUnprocessableEntity, f.post(t, "k1", `{"amount":2}`))

			reqs := f.requestSpans()
			require.Len(t, reqs, 3)
			for i, want := range []struct {
				outcome  idem.Outcome
				replayed bool
				status   int64
			}{{idem.OutcomeExecuted, false, 201}, {idem.OutcomeReplayed, true, 201}, {idem.OutcomeKeyReused, false, 422}} {
				a := attrs(reqs[i])
				require.Equal(t, string(want.outcome), a["idem.outcome"].AsString())
				require.Equal(t, want.replayed, a["idem.replayed"].AsBool())
				require.False(t, a["idem.reacquired"].AsBool())
				require.Equal(t, mode.String(), a["idem.mode"].AsString())
				require.Equal(t, "POST /v1/payments", a["http.route"].AsString())
				require.Equal(t, want.status, a["http.response.status_code"].AsInt64())
				require.Equal(t, codes.Unset, reqs[i].Status().Code, "a 422 is an answer, not a span error")
			}

			// Every store operation is a child of its request's span; the
			// first request's Get found nothing, which is no error.
			children := map[string][]sdktrace.ReadOnlySpan{}
			for _, s := range f.spans.Ended() {
				if s.Name() != "idem.request" {
					children[s.Parent().SpanID().String()] = append(children[s.Parent().SpanID().String()], s)
				}
			}
			first := children[reqs[0].SpanContext().SpanID().String()]
			require.NotEmpty(t, first)
			var ops []string
			for _, s := range first {
				ops = append(ops, s.Name())
				require.Equal(t, reqs[0].SpanContext().TraceID(), s.SpanContext().TraceID())
			}
			require.Contains(t, ops, "idem.get")
			require.Contains(t, ops, "idem.complete")
			for _, s := range first {
				a := attrs(s)
				if s.Name() == "idem.get" {
					require.Equal(t, "not_found", a["idem.result"].AsString())
					require.Equal(t, codes.Unset, s.Status().Code)
				}
			}
		})
	}
}

func TestStoreErrorIsASpanError(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tel, err := idemotel.New(idemotel.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	require.NoError(t, err)
	pool := pgtest.Pool(t, 2)
	st := pgstore.New(pool) // not migrated: every store operation fails
	mw, err := idem.New(st, idem.Config{StartFunc: tel.Start, TraceFunc: tel.Trace})
	require.NoError(t, err)
	res := mw.Do(context.Background(), idem.Call{Scope: "alice", Key: "k1", Fingerprint: store.Fingerprint{Version: 1, Method: "Pay", Path: "Pay", Hash: make([]byte, 32)}},
		func(context.Context) idem.Response { return idem.Response{StatusCode: 200} })
	require.Equal(t, idem.OutcomeStoreUnavailable, res.Outcome)
	var sawStoreError bool
	for _, s := range spans.Ended() {
		if s.Name() == "idem.request" {
			require.Equal(t, codes.Error, s.Status().Code)
		} else if attrs(s)["idem.result"].AsString() == "error" {
			sawStoreError = true
			require.Equal(t, codes.Error, s.Status().Code)
		}
	}
	require.True(t, sawStoreError)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, idem.ModeAtomic)
	require.Equal(t, http.StatusCreated, f.post(t, "k1", `{"amount":1}`))
	require.Equal(t, http.StatusCreated, f.post(t, "k1", `{"amount":1}`))

	got := collect(t, f.reader)
	requests, ok := got["idem.requests"].(metricdata.Sum[int64])
	require.True(t, ok, "idem.requests is an int64 sum")
	byOutcome := map[string]int64{}
	for _, dp := range requests.DataPoints {
		route, _ := dp.Attributes.Value("http.route")
		require.Equal(t, "POST /v1/payments", route.AsString())
		outcome, _ := dp.Attributes.Value("idem.outcome")
		byOutcome[outcome.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"executed": 1, "replayed": 1}, byOutcome)
	ops, ok := got["idem.store.operation.duration"].(metricdata.Histogram[float64])
	require.True(t, ok)
	seen := map[string]bool{}
	for _, dp := range ops.DataPoints {
		op, _ := dp.Attributes.Value("idem.operation")
		seen[op.AsString()] = true
	}
	require.True(t, seen["get"] && seen["begin"] && seen["commit"], "store operations timed: %v", seen)
	_, ok = got["idem.request.duration"].(metricdata.Histogram[float64])
	require.True(t, ok)
}

// collect reads reader's metrics, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, idemotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	return got
}
