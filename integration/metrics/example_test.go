package metrics_test

import (
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/metrics"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/sweeper"
)

// Wiring metrics, logs and the sweeper into a service.
func Example() {
	var pool *pgxpool.Pool // the service's pool
	store := pgstore.New(pool)
	m := metrics.New(prometheus.DefaultRegisterer)
	mw, err := idem.New(store, idem.Config{
		ObserveFunc: idem.ObserveAll(m.Observe, idem.LogEvents(slog.Default())),
		TraceFunc:   m.Trace,
	})
	if err != nil {
		panic(err)
	}
	sw, err := sweeper.New(store, sweeper.Config{ObserveFunc: m.ObserveSweep, Logger: slog.Default()})
	if err != nil {
		panic(err)
	}
	_ = sw // go sw.Run(ctx)

	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Require(http.NotFoundHandler()))
	mux.Handle("GET /metrics", promhttp.Handler())
}
