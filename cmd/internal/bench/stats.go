package bench

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pgCounters are cluster-wide counters read before and after a segment and
// divided by every request of the segment, warm-up included. WAL bytes are
// the WAL insert position, exact; WAL flushes come from pg_stat_wal, which
// a backend publishes up to a second late while busy (and up to ten once
// idle), so they are read after Config.Settle and are approximate.
type pgCounters struct {
	WALBytes   float64
	WALSyncs   int64
	Statements int64 // pg_stat_statements calls since the segment's reset; -1 without it
	// RoundTrips is the server's count of round trips to PostgreSQL (the
	// trivial server's); -1 for a server that does not count them.
	// PeerTrips is its peer's (the gateway's upstream's), or -1.
	RoundTrips, PeerTrips int64
}

func readCounters(ctx context.Context, pool *pgxpool.Pool, pgss bool) (pgCounters, error) {
	var c pgCounters
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8, wal_sync FROM pg_stat_wal`).
		Scan(&c.WALBytes, &c.WALSyncs); err != nil {
		return c, err
	}
	c.Statements, c.RoundTrips, c.PeerTrips = -1, -1, -1
	if pgss {
		// Only statements that ran in this segment's database, less the
		// generator's own bookkeeping.
		err := pool.QueryRow(ctx, `
SELECT coalesce(sum(calls), 0)::bigint FROM public.pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query NOT LIKE '%pg_stat%'`).Scan(&c.Statements)
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// enablePgss makes pg_stat_statements readable when the server preloads
// it, and reports whether it does.
func enablePgss(ctx context.Context, pool *pgxpool.Pool) bool {
	var preload string
	if err := pool.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&preload); err != nil {
		return false
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		return false
	}
	_, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public`)
	return err == nil
}

func resetPgss(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `SELECT public.pg_stat_statements_reset()`)
	return err
}

// topStatement is one line of a variant's statement profile.
type topStatement struct {
	Query  string
	Calls  int64
	MeanMS float64
	TotMS  float64
}

func topStatements(ctx context.Context, pool *pgxpool.Pool, n int) ([]topStatement, error) {
	rows, err := pool.Query(ctx, `
SELECT regexp_replace(query, '\s+', ' ', 'g'), calls, mean_exec_time, total_exec_time
  FROM public.pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query NOT LIKE '%pg_stat%'
 ORDER BY calls DESC, total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []topStatement
	for rows.Next() {
		var s topStatement
		if err := rows.Scan(&s.Query, &s.Calls, &s.MeanMS, &s.TotMS); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// sample is one variant's measured window in one round.
type sample struct {
	Variant  string
	Round    int
	Measured int // requests in the measured window
	Total    int // requests in the segment, warm-up included
	Bad      int
	RPS      float64
	P50, P99 time.Duration
	Outcomes map[string]int
	// Per request of the segment:
	StmtsPerReq, WALPerReq, SyncsPerReq float64
	TripsPerReq                         float64 // -1 when unknown
	PeerTripsPerReq                     float64 // the peer's; -1 when unknown
	// CPU is the CPU milliseconds per measured request of the server,
	// the PostgreSQL cluster and the generator, over the measured window.
	CPU     cpuTimes
	Effects *effectCheck `json:"Storm"` // as Row.Effects
	Top     []topStatement
	// Workers are each Citus worker's share, for a variant on Citus;
	// WorkerTop is the statement profile of its first worker, as Top.
	Workers   []WorkerSample `json:",omitempty"`
	WorkerTop []topStatement `json:",omitempty"`
}

func newSample(name string, round int, t *tally, d time.Duration) *sample {
	s := &sample{Variant: name, Round: round, Measured: len(t.lat), Total: t.total, Bad: t.bad, Outcomes: t.outcomes,
		StmtsPerReq: -1, TripsPerReq: -1, PeerTripsPerReq: -1}
	s.RPS = float64(len(t.lat)) / d.Seconds()
	s.P50, s.P99 = percentile(t.lat, 0.50), percentile(t.lat, 0.99)
	return s
}

func (s *sample) counters(before, after pgCounters) {
	if s.Total == 0 {
		return
	}
	n := float64(s.Total)
	s.WALPerReq = (after.WALBytes - before.WALBytes) / n
	s.SyncsPerReq = float64(after.WALSyncs-before.WALSyncs) / n
	if after.Statements >= 0 {
		s.StmtsPerReq = float64(after.Statements) / n
	}
	if before.RoundTrips >= 0 && after.RoundTrips >= 0 {
		s.TripsPerReq = float64(after.RoundTrips-before.RoundTrips) / n
	}
	if before.PeerTrips >= 0 && after.PeerTrips >= 0 {
		s.PeerTripsPerReq = float64(after.PeerTrips-before.PeerTrips) / n
	}
}

// percentile of sorted latencies, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
