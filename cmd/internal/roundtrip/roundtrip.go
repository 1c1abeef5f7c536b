// Package roundtrip counts the round trips a process makes to PostgreSQL
// through pgx: the figure make bench reports per request, read from
// paymentsd's /metrics and from the benchmark's trivial server.
//
// It uses nothing but pgx's tracer interfaces, so that the benchmark can
// compile it into a build of an earlier tree (cmd/internal/bench).
package roundtrip

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Counter is a pgx tracer (pgx.QueryTracer, pgx.BatchTracer) that counts
// round trips: each statement sent alone, and each batch, is one (once the
// connection has prepared the statement). Its zero value counts from 0.
type Counter struct{ n atomic.Int64 }

// Count is the round trips counted so far.
func (c *Counter) Count() int64 { return c.n.Load() }

func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
