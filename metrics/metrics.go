// Package metrics exports Prometheus metrics for the idem middleware and
// sweeper:
//
//	m := metrics.New(prometheus.DefaultRegisterer)
//	mw, err := idem.New(store, idem.Config{
//		ObserveFunc: idem.ObserveAll(m.Observe, idem.LogEvents(logger)),
//		TraceFunc:   m.Trace,
//	})
//	sw, err := sweeper.New(store, sweeper.Config{ObserveFunc: m.ObserveSweep})
//
// The metrics, all prefixed idem_:
//
//	requests_total{route,outcome}                   counter    requests that carried a key, by outcome (idem.Outcome)
//	request_duration_seconds{route,outcome}         histogram  their time in the middleware, handler included
//	reacquires_total{route}                         counter    requests that took over a FAILED, lease-expired or expired record
//	lease_renewals_total{route}                     counter    lease renewals while leased-mode handlers ran
//	fencing_rejections_total{op}                    counter    writes (complete, fail, renew) refused because another attempt holds the record
//	store_operation_duration_seconds{op,result}     histogram  each store operation of the middleware; result is ok, not_found, not_held, wait_timeout, key_exists or error
//	sweep_deleted_total                             counter    expired records the sweeper deleted
//	sweep_batches_total{result}                     counter    sweeper batches; result is ok, busy (another replica sweeps) or error
//	sweep_batch_duration_seconds                    histogram  each sweeper batch
//
// route is idem.Event.Route, the router's pattern with the method (a
// ServeMux's, chi's, or gin's and echo's through idemgin and idemecho),
// never the concrete path, so that its values stay few; "unrouted" when no
// router matched the request (set Config.RouteFunc then). The store histograms need
// Config.TraceFunc; the rest need only Config.ObserveFunc.
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// Config configures NewWithOpts. Its zero value is valid.
type Config struct {
	// RouteFunc names the route label of an event. Default: Event.Route,
	// or "unrouted" when it is empty. Return a route template, never a
	// concrete path, or the series multiply without bound.
	RouteFunc func(idem.Event) string
}

// Metrics holds the collectors. Its methods are safe for concurrent use.
type Metrics struct {
	routeFunc func(idem.Event) string

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	reacquires      *prometheus.CounterVec
	renewals        *prometheus.CounterVec
	fencing         *prometheus.CounterVec
	storeDuration   *prometheus.HistogramVec
	sweepDeleted    prometheus.Counter
	sweepBatches    *prometheus.CounterVec
	sweepDuration   prometheus.Histogram
}

// storeBuckets suit single-row statements: 250µs to 2.5s.
var storeBuckets = []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New returns Metrics registered with reg (none when reg is nil). It panics
// when reg already holds metrics of the same names, as
// prometheus.MustRegister does.
func New(reg prometheus.Registerer) *Metrics { return NewWithOpts(reg, Config{}) }

// NewWithOpts is New with options.
func NewWithOpts(reg prometheus.Registerer, opts Config) *Metrics {
	m := &Metrics{
		routeFunc: opts.RouteFunc,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_requests_total",
			Help: "Requests that carried an idempotency key, by route and outcome.",
		}, []string{"route", "outcome"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_request_duration_seconds",
			Help:    "Time requests that carried an idempotency key spent in the middleware, handler included.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "outcome"}),
		reacquires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_reacquires_total",
			Help: "Requests that took over a FAILED, lease-expired or expired idempotency record.",
		}, []string{"route"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_lease_renewals_total",
			Help: "Lease renewals while leased-mode handlers ran.",
		}, []string{"route"}),
		fencing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_fencing_rejections_total",
			Help: "Writes to an idempotency record refused because another attempt holds it.",
		}, []string{"op"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_store_operation_duration_seconds",
			Help:    "Store operations of the idempotency middleware, by operation and result.",
			Buckets: storeBuckets,
		}, []string{"op", "result"}),
		sweepDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idem_sweep_deleted_total",
			Help: "Expired idempotency records the sweeper deleted.",
		}),
		sweepBatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_sweep_batches_total",
			Help: "Sweeper batches, by result: ok, busy (another process sweeps) or error.",
		}, []string{"result"}),
		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "idem_sweep_batch_duration_seconds",
			Help:    "Time of each sweeper batch.",
			Buckets: storeBuckets,
		}),
	}
	if m.routeFunc == nil {
		m.routeFunc = func(e idem.Event) string { return e.Route }
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.requestDuration, m.reacquires, m.renewals, m.fencing,
			m.storeDuration, m.sweepDeleted, m.sweepBatches, m.sweepDuration)
	}
	return m
}

// Observe counts one request: plug it into idem.Config.ObserveFunc.
func (m *Metrics) Observe(e idem.Event) {
	route := m.routeFunc(e)
	if route == "" {
		route = "unrouted"
	}
	outcome := string(e.Outcome)
	m.requests.WithLabelValues(route, outcome).Inc()
	m.requestDuration.WithLabelValues(route, outcome).Observe(e.Duration.Seconds())
	if e.Reacquired {
		m.reacquires.WithLabelValues(route).Inc()
	}
	if e.Renewals > 0 {
		m.renewals.WithLabelValues(route).Add(float64(e.Renewals))
	}
}

// Trace times one store operation: plug it into idem.Config.TraceFunc
// (with idem.TraceAll to trace as well).
func (m *Metrics) Trace(ctx context.Context, op idem.Op) (context.Context, func(error)) {
	start := time.Now()
	return ctx, func(err error) {
		result := idem.TraceResult(err)
		m.storeDuration.WithLabelValues(string(op), result).Observe(time.Since(start).Seconds())
		if result == "not_held" {
			m.fencing.WithLabelValues(string(op)).Inc()
		}
	}
}

// ObserveSweep counts one sweeper batch: plug it into
// sweeper.Config.ObserveFunc.
func (m *Metrics) ObserveSweep(b sweeper.Batch) {
	result := "ok"
	switch {
	case errors.Is(b.Err, store.ErrSweepBusy):
		result = "busy"
	case b.Err != nil:
		result = "error"
	}
	m.sweepBatches.WithLabelValues(result).Inc()
	m.sweepDeleted.Add(float64(b.Deleted))
	if result != "busy" {
		m.sweepDuration.Observe(b.Duration.Seconds())
	}
}
