// Package otlp exports the idem layer's spans and metrics over OTLP/HTTP,
// for every server of the repository (--otlp-endpoint).
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/idemotel"
)

// Start exports the middleware's spans and metrics over OTLP/HTTP to
// endpoint, a collector's base URL such as http://127.0.0.1:4318 (traces
// go to its /v1/traces, metrics to /v1/metrics), as service. The function
// it returns flushes and stops the exporters.
func Start(ctx context.Context, endpoint, service string) (*idemotel.Telemetry, func(context.Context) error, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, cli.Usagef("--otlp-endpoint %q: want an http:// or https:// URL, such as http://127.0.0.1:4318", endpoint)
	}
	base := strings.TrimSuffix(u.Path, "/")
	traceOpts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(base + "/v1/traces")}
	metricOpts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(u.Host), otlpmetrichttp.WithURLPath(base + "/v1/metrics")}
	if u.Scheme == "http" {
		traceOpts = append(traceOpts, otlptracehttp.WithInsecure())
		metricOpts = append(metricOpts, otlpmetrichttp.WithInsecure())
	}
	spans, err := otlptracehttp.New(ctx, traceOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp traces: %w", err)
	}
	points, err := otlpmetrichttp.New(ctx, metricOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp metrics: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(points)), sdkmetric.WithResource(res))
	stop := func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)) }
	tel, err := idemotel.New(idemotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		return nil, nil, errors.Join(err, stop(ctx))
	}
	return tel, stop, nil
}
