package idemprom_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
	"github.com/idem-dev/idem/idemprom"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// newStore returns the in-memory reference store behind a switch that
// takes it down: what the metrics count does not depend on the store
// (each store passes storetest on its own database).
func newStore(*testing.T) *adaptertest.DownStore { return adaptertest.NewDownStore(memstore.New()) }

// value is a counter's value, or a histogram's sample count, of the series
// of name whose labels include the given name/value pairs; 0 when there is
// none.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// server serves two routes behind the middleware: /v1/payments answers the
// X-Status header's status (201 by default), /v1/slow takes 250ms.
func server(t *testing.T, st store.Store, m *idemprom.Metrics) http.Handler {
	t.Helper()
	mw, err := idem.New(st, idem.Config{
		LeaseDuration: 150 * time.Millisecond,
		ObserveFunc:   m.Observe,
		TraceFunc:     m.Trace,
		// Every request reads its key first: the tests count the reads.
		ReplayCacheBytes: -1,
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusCreated
		if s := r.Header.Get("X-Status"); s != "" {
			status, _ = strconv.Atoi(s)
		}
		w.WriteHeader(status)
	})))
	mux.Handle("POST /v1/slow", mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(250 * time.Millisecond)
		w.WriteHeader(http.StatusCreated)
	})))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
	})
}

func do(h http.Handler, path, key, body, status string) int {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if status != "" {
		req.Header.Set("X-Status", status)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	const route = "POST /v1/payments"

	t.Run("CountsOutcomesPerRoute", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		m := idemprom.New(reg)
		h := server(t, newStore(t), m)

		require.Equal(t, 201, do(h, "/v1/payments", "k1", `{"a":1}`, ""))
		require.Equal(t, 201, do(h, "/v1/payments", "k1", `{"a":1}`, ""))
		require.Equal(t, 422, do(h, "/v1/payments", "k1", `{"a":2}`, ""))
		require.Equal(t, 400, do(h, "/v1/payments", "", `{"a":1}`, ""))
		require.Equal(t, 503, do(h, "/v1/payments", "k2", `{}`, "503"))
		require.Equal(t, 201, do(h, "/v1/payments", "k2", `{}`, "")) // re-acquires the FAILED record

		for outcome, want := range map[idem.Outcome]float64{
			idem.OutcomeExecuted:   2,
			idem.OutcomeReplayed:   1,
			idem.OutcomeKeyReused:  1,
			idem.OutcomeInvalidKey: 1,
			idem.OutcomeFailed:     1,
		} {
			require.Equal(t, want, value(t, reg, "idem_requests_total", "route", route, "outcome", string(outcome)), outcome)
			require.Equal(t, want, value(t, reg, "idem_request_duration_seconds", "route", route, "outcome", string(outcome)), outcome)
		}
		require.Equal(t, 1.0, value(t, reg, "idem_reacquires_total", "route", route))
		require.Equal(t, 1.0, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpReacquire), "result", "ok"))
		require.Equal(t, 2.0, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpGet), "result", "not_found"),
			"k1 and k2 were unused at first")
		require.Equal(t, 3.0, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpInsert), "result", "ok"),
			"k1, k2, and k2's retry, which finds the FAILED record and re-acquires it")
		require.Equal(t, 1.0, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpFail), "result", "ok"))
		require.Zero(t, value(t, reg, "idem_fencing_rejections_total"))

		// promlint, not testutil.GatherAndLint: testutil's diffing library
		// would enter idemprom's go.mod, and its users' module graphs.
		families, err := reg.Gather()
		require.NoError(t, err)
		problems, err := promlint.NewWithMetricFamilies(families).Lint()
		require.NoError(t, err)
		require.Empty(t, problems)
	})

	t.Run("CountsRenewals", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		h := server(t, newStore(t), idemprom.New(reg))
		require.Equal(t, 201, do(h, "/v1/slow", "k1", `{}`, ""))
		require.GreaterOrEqual(t, value(t, reg, "idem_lease_renewals_total", "route", "POST /v1/slow"), 2.0,
			"a 250ms handler renews a 150ms lease every 50ms")
		require.GreaterOrEqual(t, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpRenew), "result", "ok"), 2.0)
	})

	t.Run("CountsStoreErrors", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		st := newStore(t)
		h := server(t, st, idemprom.New(reg))
		st.Down()
		require.Equal(t, 503, do(h, "/v1/payments", "k1", `{}`, ""))
		require.Equal(t, 1.0, value(t, reg, "idem_requests_total", "route", route, "outcome", string(idem.OutcomeStoreUnavailable)))
		require.Equal(t, 1.0, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpGet), "result", "error"))
	})

	t.Run("CountsFencingRejections", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		m := idemprom.New(reg)
		for _, op := range []idem.Op{idem.OpComplete, idem.OpRenew} {
			_, end := m.Trace(context.Background(), op)
			end(store.ErrNotHeld)
		}
		require.Equal(t, 2.0, value(t, reg, "idem_fencing_rejections_total"))
		require.Equal(t, 1.0, value(t, reg, "idem_store_operation_duration_seconds", "op", string(idem.OpRenew), "result", "not_held"))
	})

	t.Run("RouteFallsBackForUnroutedRequests", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		m := idemprom.New(reg)
		m.Observe(idem.Event{Outcome: idem.OutcomeReplayed})
		require.Equal(t, 1.0, value(t, reg, "idem_requests_total", "route", "unrouted"))
		reg = prometheus.NewRegistry()
		m = idemprom.NewWithConfig(reg, idemprom.Config{RouteFunc: func(idem.Event) string { return "/v1/payments/{id}" }})
		m.Observe(idem.Event{Outcome: idem.OutcomeReplayed, Path: "/v1/payments/p1"})
		require.Equal(t, 1.0, value(t, reg, "idem_requests_total", "route", "/v1/payments/{id}"))
	})

	t.Run("CountsSweeps", func(t *testing.T) {
		t.Parallel()
		// Seven claims abandoned and past their retention: the bubble's
		// clock, which memstore reads, moves past both at once.
		synctest.Test(t, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := idemprom.New(reg)
			st := memstore.New()
			ctx := context.Background()
			for i := range 7 {
				_, inserted, err := st.Insert(ctx, store.Claim{
					Scope: "alice", Key: "k" + strconv.Itoa(i), Token: "t" + strconv.Itoa(i),
					Fingerprint: store.Fingerprint{Version: 1, Method: http.MethodPost, Path: "/v1/payments", Hash: make([]byte, 32)},
					Lease:       time.Second, TTL: time.Minute,
				})
				require.NoError(t, err)
				require.True(t, inserted)
			}
			time.Sleep(time.Minute + time.Second)
			sw, err := sweeper.New(st, sweeper.Config{BatchSize: 3, MaxBatchSize: 3, Pause: -1, ObserveFunc: m.ObserveSweep})
			require.NoError(t, err)
			n, err := sw.Once(ctx)
			require.NoError(t, err)
			require.Equal(t, 7, n)
			m.ObserveSweep(sweeper.Batch{Err: store.ErrSweepBusy})
			require.Equal(t, 7.0, value(t, reg, "idem_sweep_deleted_total"))
			require.Equal(t, 3.0, value(t, reg, "idem_sweep_batches_total", "result", "ok"))
			require.Equal(t, 1.0, value(t, reg, "idem_sweep_batches_total", "result", "busy"))
			require.Equal(t, 3.0, value(t, reg, "idem_sweep_batch_duration_seconds"))
		})
	})
}

// BenchmarkTraceFunc measures a replay (the hot path: one read) through the
// middleware with no TraceFunc, a TraceFunc that does nothing, and the
// Prometheus metrics. Compare allocs/op: a nil TraceFunc adds nothing, and
// the wrapper itself allocates nothing per operation.
//
//	go test -run '^$' -bench TraceFunc -benchmem .
func BenchmarkTraceFunc(b *testing.B) {
	st := memstore.New()
	noop := func(error) {}
	for _, bc := range []struct {
		name  string
		trace idem.TraceFunc
	}{
		{"Nil", nil},
		{"Noop", func(ctx context.Context, _ idem.Op) (context.Context, func(error)) { return ctx, noop }},
		{"Metrics", idemprom.New(prometheus.NewRegistry()).Trace},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mw, err := idem.New(st, idem.Config{TraceFunc: bc.trace})
			require.NoError(b, err)
			h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) }))
			h.ServeHTTP(httptest.NewRecorder(), benchRequest("bench-"+bc.name))
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, benchRequest("bench-"+bc.name))
				if w.Code != http.StatusCreated {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

func benchRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	return r.WithContext(idem.WithScope(r.Context(), "alice"))
}
