package idemotel_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemotel"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/sweeper"
)

// Wiring OpenTelemetry into a service: a span around each keyed request
// and each store operation, the request metrics, the sweeper's. With no
// SDK installed the global providers record nothing, as here; a service
// installs its SDK's providers with otel.SetTracerProvider and
// otel.SetMeterProvider, or passes them in Config. The request's span is a
// child of the caller's, so the handler runs in the caller's trace. The
// example runs on memstore, the in-memory store; in production it is
// pgstore.New(pool) or sqlitestore.New(db).
func Example() {
	tel, err := idemotel.New(idemotel.Config{}) // the global providers
	if err != nil {
		log.Fatal(err)
	}
	st := memstore.New()
	mw, err := idem.New(st, idem.Config{StartFunc: tel.Start, TraceFunc: tel.Trace, ObserveFunc: tel.Observe})
	if err != nil {
		log.Fatal(err)
	}
	sw, err := sweeper.New(st, sweeper.Config{ObserveFunc: tel.ObserveSweep})
	if err != nil {
		log.Fatal(err)
	}
	_ = sw // go sw.Run(ctx)

	pay := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("handler runs in trace", trace.SpanContextFromContext(r.Context()).TraceID())
		w.WriteHeader(http.StatusCreated)
	}))
	// The caller's span, as otelhttp or a propagator extracts it from the
	// traceparent header.
	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount":1000}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7")
		ctx := trace.ContextWithRemoteSpanContext(idem.WithScope(req.Context(), "user-42"), caller)
		rec := httptest.NewRecorder()
		pay.ServeHTTP(rec, req.WithContext(ctx))
		fmt.Println(rec.Code, "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// handler runs in trace 4bf92f3577b34da6a3ce929d0e0e4736
	// 201 replayed: false
	// 201 replayed: true
}
