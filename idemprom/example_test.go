package idemprom_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemprom"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/sweeper"
)

// Wiring the metrics into a service: the middleware's outcomes and store
// operations, and the sweeper's batches, on a registry /metrics serves. A
// payment is sent twice with one key: executed once, replayed once. The
// example runs on memstore, the in-memory store; in production it is
// pgstore.New(pool) or sqlitestore.New(db), the registry is often
// prometheus.DefaultRegisterer, and idem.ObserveAll(m.Observe,
// idem.LogEvents(logger)) logs the events too.
func Example() {
	st := memstore.New()
	reg := prometheus.NewRegistry()
	m := idemprom.New(reg)
	mw, err := idem.New(st, idem.Config{ObserveFunc: m.Observe, TraceFunc: m.Trace})
	if err != nil {
		log.Fatal(err)
	}
	sw, err := sweeper.New(st, sweeper.Config{ObserveFunc: m.ObserveSweep})
	if err != nil {
		log.Fatal(err)
	}
	_ = sw // go sw.Run(ctx)

	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Authentication says whose request it is; keys are scoped by it.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "user-42")))
	})

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount":1000}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7")
		handler.ServeHTTP(httptest.NewRecorder(), req)
	}
	scrape := httptest.NewRecorder()
	handler.ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(scrape.Body.String()) {
		if strings.HasPrefix(line, "idem_requests_total{") {
			fmt.Print(line)
		}
	}
	// Output:
	// idem_requests_total{outcome="executed",route="POST /v1/payments"} 1
	// idem_requests_total{outcome="replayed",route="POST /v1/payments"} 1
}
