// Package idemotel traces and measures the idem middleware with
// OpenTelemetry, beside or instead of the Prometheus metrics of package
// metrics:
//
//	tel, err := idemotel.New(idemotel.Config{}) // the global providers
//	mw, err := idem.New(store, idem.Config{
//		StartFunc:   tel.Start,   // a span around each keyed request
//		TraceFunc:   tel.Trace,   // a span and a timing for each store operation
//		ObserveFunc: tel.Observe, // the request metrics
//	})
//	sw, err := sweeper.New(store, sweeper.Config{ObserveFunc: tel.ObserveSweep})
//
// Spans: "idem.request", with the attributes idem.mode, idem.outcome,
// idem.replayed, idem.reacquired, idem.lease.renewals, http.route and
// http.response.status_code; under it one "idem.<op>" span per store
// operation (idem.Op…), with idem.result (idem.TraceResult). Only a
// failure is a span error: a store error, an abandoned request. A lost
// lease, a bounded wait that timed out, a key that exists, a key not found
// are answers the middleware acts on, not errors.
//
// Metrics, the Prometheus ones under OpenTelemetry's names:
//
//	idem.requests{http.route,idem.outcome}                    counter    requests that carried a key
//	idem.request.duration{http.route,idem.outcome}            histogram  their time in the middleware, handler included (s)
//	idem.reacquires{http.route}                               counter    requests that took over a FAILED or lease-expired record
//	idem.lease.renewals{http.route}                           counter    lease renewals while leased-mode handlers ran
//	idem.fencing.rejections{idem.operation}                   counter    writes refused because another attempt holds the record
//	idem.store.operation.duration{idem.operation,idem.result} histogram  each store operation (s)
//	idem.sweep.deleted                                        counter    expired records the sweeper deleted
//	idem.sweep.batches{idem.result}                           counter    sweeper batches: ok, busy or error
//	idem.sweep.batch.duration                                 histogram  each sweeper batch (s)
package idemotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/idem-dev/idem/idemotel"

// Config configures New. Its zero value is valid.
type Config struct {
	// TracerProvider makes the spans. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// RouteFunc names the http.route of an event. Default Event.Route, or
	// "unrouted" when it is empty. Return a route template, never a
	// concrete path, or the series multiply without bound.
	RouteFunc func(idem.Event) string
}

// Telemetry holds the tracer and the instruments. Its methods are safe for
// concurrent use.
type Telemetry struct {
	tracer    trace.Tracer
	routeFunc func(idem.Event) string

	requests        metric.Int64Counter
	requestDuration metric.Float64Histogram
	reacquires      metric.Int64Counter
	renewals        metric.Int64Counter
	fencing         metric.Int64Counter
	storeDuration   metric.Float64Histogram
	sweepDeleted    metric.Int64Counter
	sweepBatches    metric.Int64Counter
	sweepDuration   metric.Float64Histogram
}

// storeBuckets suit single-row statements: 250µs to 2.5s.
var storeBuckets = []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New returns Telemetry on the providers of opts. It fails when an
// instrument cannot be made.
func New(opts Config) (*Telemetry, error) {
	if opts.TracerProvider == nil {
		opts.TracerProvider = otel.GetTracerProvider()
	}
	if opts.MeterProvider == nil {
		opts.MeterProvider = otel.GetMeterProvider()
	}
	t := &Telemetry{tracer: opts.TracerProvider.Tracer(ScopeName), routeFunc: opts.RouteFunc}
	if t.routeFunc == nil {
		t.routeFunc = func(e idem.Event) string { return e.Route }
	}
	m := opts.MeterProvider.Meter(ScopeName)
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets ...float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	defBuckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	t.requests = counter("idem.requests", "{request}", "Requests that carried an idempotency key, by route and outcome.")
	t.requestDuration = histogram("idem.request.duration", "Time requests that carried an idempotency key spent in the middleware, handler included.", defBuckets...)
	t.reacquires = counter("idem.reacquires", "{request}", "Requests that took over a FAILED or lease-expired idempotency record.")
	t.renewals = counter("idem.lease.renewals", "{renewal}", "Lease renewals while leased-mode handlers ran.")
	t.fencing = counter("idem.fencing.rejections", "{write}", "Writes to an idempotency record refused because another attempt holds it.")
	t.storeDuration = histogram("idem.store.operation.duration", "Store operations of the idempotency middleware, by operation and result.", storeBuckets...)
	t.sweepDeleted = counter("idem.sweep.deleted", "{record}", "Expired idempotency records the sweeper deleted.")
	t.sweepBatches = counter("idem.sweep.batches", "{batch}", "Sweeper batches, by result: ok, busy (another process sweeps) or error.")
	t.sweepDuration = histogram("idem.sweep.batch.duration", "Time of each sweeper batch.", storeBuckets...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("idemotel: make instruments: %w", err)
	}
	return t, nil
}

// Start opens the span of a keyed request: plug it into
// idem.Config.StartFunc. The store operations' spans and the handler's
// run under it.
func (t *Telemetry) Start(ctx context.Context) (context.Context, func(idem.Event)) {
	ctx, span := t.tracer.Start(ctx, "idem.request")
	return ctx, func(e idem.Event) {
		span.SetAttributes(
			attribute.String("idem.mode", e.Mode.String()),
			attribute.String("idem.outcome", string(e.Outcome)),
			attribute.Bool("idem.replayed", e.Outcome == idem.OutcomeReplayed),
			attribute.Bool("idem.reacquired", e.Reacquired),
			attribute.Int("idem.lease.renewals", e.Renewals),
			attribute.String("http.route", t.route(e)),
		)
		if e.StatusCode != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", e.StatusCode))
		}
		if e.Outcome == idem.OutcomeStoreUnavailable || e.Outcome == idem.OutcomeAbandoned {
			msg := string(e.Outcome)
			if e.Err != nil {
				span.RecordError(e.Err)
				msg = e.Err.Error()
			}
			span.SetStatus(codes.Error, msg)
		}
		span.End()
	}
}

// Trace opens the span of one store operation and times it: plug it into
// idem.Config.TraceFunc (with idem.TraceAll beside metrics.Trace).
func (t *Telemetry) Trace(ctx context.Context, op idem.Op) (context.Context, func(error)) {
	start := time.Now()
	ctx, span := t.tracer.Start(ctx, "idem."+string(op), trace.WithSpanKind(trace.SpanKindClient))
	return ctx, func(err error) {
		result := idem.TraceResult(err)
		opAttr := attribute.String("idem.operation", string(op))
		span.SetAttributes(opAttr, attribute.String("idem.result", result))
		if result == "error" {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		t.storeDuration.Record(ctx, time.Since(start).Seconds(),
			metric.WithAttributes(opAttr, attribute.String("idem.result", result)))
		if result == "not_held" {
			t.fencing.Add(ctx, 1, metric.WithAttributes(opAttr))
		}
	}
}

// Observe counts one request: plug it into idem.Config.ObserveFunc (with
// idem.ObserveAll beside metrics.Observe and logs).
func (t *Telemetry) Observe(e idem.Event) {
	ctx := context.Background()
	route := attribute.String("http.route", t.route(e))
	both := metric.WithAttributes(route, attribute.String("idem.outcome", string(e.Outcome)))
	t.requests.Add(ctx, 1, both)
	t.requestDuration.Record(ctx, e.Duration.Seconds(), both)
	if e.Reacquired {
		t.reacquires.Add(ctx, 1, metric.WithAttributes(route))
	}
	if e.Renewals > 0 {
		t.renewals.Add(ctx, int64(e.Renewals), metric.WithAttributes(route))
	}
}

// ObserveSweep counts one sweeper batch: plug it into
// sweeper.Config.ObserveFunc.
func (t *Telemetry) ObserveSweep(b sweeper.Batch) {
	ctx := context.Background()
	result := "ok"
	switch {
	case errors.Is(b.Err, store.ErrSweepBusy):
		result = "busy"
	case b.Err != nil:
		result = "error"
	}
	t.sweepBatches.Add(ctx, 1, metric.WithAttributes(attribute.String("idem.result", result)))
	t.sweepDeleted.Add(ctx, int64(b.Deleted))
	if result != "busy" {
		t.sweepDuration.Record(ctx, b.Duration.Seconds())
	}
}

func (t *Telemetry) route(e idem.Event) string {
	if r := t.routeFunc(e); r != "" {
		return r
	}
	return "unrouted"
}
