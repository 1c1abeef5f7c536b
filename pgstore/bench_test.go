package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// BenchmarkRequestPath runs make bench's trivial handler (one INSERT)
// behind the middleware in each mode, for the request path's allocations
// (-benchmem) and what each request costs PostgreSQL: statements,
// transactions and WAL (pg_stat_statements when the server preloads it,
// pg_stat_wal), and the share of the key table's updates that were
// heap-only (HOT). The WAL figures are the server's: run it on a server of
// its own (make bench's cluster) for figures that are the benchmark's
// alone.
func BenchmarkRequestPath(b *testing.B) {
	bench := newBenchDB(b)
	c := bench.config()
	c.MeasureFunc = func(b *testing.B, s store.Store) func(int) {
		before := readServerStats(b, bench.pool, bench.table)
		report := bench.trips.measure(b)
		return func(n int) {
			report(n)
			after := awaitServerStats(b, bench.pool, bench.table, before.inserts+int64(n))
			after.report(b, before, n)
		}
	}
	storetest.BenchmarkRequestPath(b, c)
}

// BenchmarkReplayPath runs retries of completed requests without the
// replay cache, each one read of its key's record, for the replay path's
// allocations (-benchmem) and round trips.
func BenchmarkReplayPath(b *testing.B) {
	bench := newBenchDB(b)
	c := bench.config()
	c.MeasureFunc = func(b *testing.B, _ store.Store) func(int) { return bench.trips.measure(b) }
	storetest.BenchmarkReplayPath(b, c)
}

// benchDB is a benchmark's schema: its pool, counting round trips, a
// table for the trivial handler's things, and the key table of the mode
// being measured.
type benchDB struct {
	pool   *pgxpool.Pool
	trips  *roundTrips
	stores int
	table  string
}

func newBenchDB(b *testing.B) *benchDB {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(b, pgtest.Schema(b)))
	if err != nil {
		b.Fatal(err)
	}
	d := &benchDB{trips: &roundTrips{}}
	cfg.ConnConfig.Tracer, cfg.MaxConns = d.trips, 8
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.pool.Close)
	if _, err := d.pool.Exec(ctx, `CREATE TABLE bench_things (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id text NOT NULL, amount bigint NOT NULL, note text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return d
}

// config runs make bench's trivial handler on a key table of its own per
// mode, in the same schema.
func (d *benchDB) config() storetest.BenchmarkConfig {
	ctx := context.Background()
	return storetest.BenchmarkConfig{
		NewStore: func(b *testing.B) store.Store {
			d.stores++
			d.table = "bench_keys_" + string(rune('a'+d.stores))
			if _, err := pgstore.MigrateWithConfig(ctx, d.pool, pgstore.MigrateConfig{Table: d.table}); err != nil {
				b.Fatal(err)
			}
			s, err := pgstore.NewWithConfig(d.pool, pgstore.Config{Table: d.table})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		Handler: storetest.BenchmarkHandler(func(ctx context.Context, amount int64, note string) (int64, error) {
			var id int64
			err := pgstore.DB(ctx, d.pool).QueryRow(ctx,
				`INSERT INTO bench_things (user_id, amount, note) VALUES ('u1', $1, $2) RETURNING id`, amount, note).Scan(&id)
			return id, err
		}),
	}
}

// measure reports, per request from now to the call of the function it
// returns, the round trips and the statements sent.
func (c *roundTrips) measure(b *testing.B) func(n int) {
	trips0, stmts0 := c.n.Load(), c.statements.Load()
	return func(n int) {
		b.ReportMetric(float64(c.n.Load()-trips0)/float64(n), "trips/op")
		b.ReportMetric(float64(c.statements.Load()-stmts0)/float64(n), "sent/op")
	}
}

// serverStats are PostgreSQL's counters a benchmark reads before and after.
type serverStats struct {
	statements, transactions     int64 // -1 without pg_stat_statements
	walBytes, walRecords, walFPI int64
	walSyncs                     int64
	inserts, updates, hotUpdates int64 // the key table's
}

// readServerStats reads the counters, the key table's from table.
func readServerStats(b *testing.B, pool *pgxpool.Pool, table string) serverStats {
	b.Helper()
	ctx := context.Background()
	var s serverStats
	var pgss bool
	err := pool.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'`).Scan(&pgss)
	if err != nil {
		b.Fatal(err)
	}
	s.statements = -1
	if pgss {
		if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public`); err != nil {
			b.Fatal(err)
		}
		err = pool.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM public.pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&s.statements)
		if err != nil {
			b.Fatal(err)
		}
	}
	err = pool.QueryRow(ctx, `
SELECT d.xact_commit + d.xact_rollback, pg_current_wal_lsn() - '0/0'::pg_lsn, w.wal_records, w.wal_fpi, w.wal_sync,
       t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd
  FROM pg_stat_database d, pg_stat_wal w, pg_stat_user_tables t
 WHERE d.datname = current_database() AND t.relid = $1::regclass`, table).Scan(
		&s.transactions, &s.walBytes, &s.walRecords, &s.walFPI, &s.walSyncs, &s.inserts, &s.updates, &s.hotUpdates)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// awaitServerStats reads the counters once the key table's inserts reach
// inserts: backends report their counters a moment after their
// transactions end.
func awaitServerStats(b *testing.B, pool *pgxpool.Pool, table string, inserts int64) serverStats {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := readServerStats(b, pool, table)
		if s.inserts >= inserts {
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("the key table's inserts reached %d of %d in a minute", s.inserts, inserts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// report reports the counters per request since before.
func (s serverStats) report(b *testing.B, before serverStats, n int) {
	per := func(after, before int64) float64 { return float64(after-before) / float64(n) }
	if s.statements >= 0 && before.statements >= 0 {
		b.ReportMetric(per(s.statements, before.statements), "pgss-stmts/op")
	}
	b.ReportMetric(per(s.transactions, before.transactions), "xacts/op")
	b.ReportMetric(per(s.walBytes, before.walBytes), "WAL-B/op")
	b.ReportMetric(per(s.walRecords, before.walRecords), "WAL-recs/op")
	b.ReportMetric(per(s.walFPI, before.walFPI), "WAL-FPI/op")
	b.ReportMetric(per(s.walSyncs, before.walSyncs), "WAL-syncs/op")
	if upd := s.updates - before.updates; upd > 0 {
		b.ReportMetric(100*float64(s.hotUpdates-before.hotUpdates)/float64(upd), "HOT-%")
	}
}
