// Command sweepbench measures the sweeper at scale: how long it takes to
// delete the expired part of a large key table, and what it does to the
// latency of the single-row reads and claims that run beside it.
//
//	scripts/test-postgres.sh go run ./cmd/internal/sweepbench -nopause
//	PG_DURABLE=1 scripts/test-postgres.sh go run ./cmd/internal/sweepbench -rows 2000000 -expired 200000
//
// It fills a throwaway schema of DATABASE_URL with -rows records (the
// oldest -expired of them past retention) by INSERT … SELECT
// generate_series, then runs a steady open-loop load of Gets of live keys
// and claims of new keys (Insert, then Complete) at -rate requests a
// second: alone for -phase (baseline), then while sweeper.Once deletes the
// expired records with the default batch size and pause. The sweep runs in
// windows of -window alternating with windows without it, and the two kinds
// of window are compared, so that whatever else the machine does hits both
// alike. It prints the p50/p99 of each operation, the sweep's rate and its
// batches, and drops the schema. It is not part of `make test`: at the
// default size it needs about 6 GB of disk and ten minutes.
package main

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

var (
	rows     = flag.Int("rows", 10_000_000, "records in the table")
	expired  = flag.Int("expired", 1_000_000, "of which past retention")
	users    = flag.Int("users", 100_000, "distinct users")
	rate     = flag.Int("rate", 400, "requests a second: half Gets, half claims")
	phase    = flag.Duration("phase", 60*time.Second, "length of the baseline phase")
	window   = flag.Duration("window", 5*time.Second, "the sweep runs in windows this long, alternating with windows without it")
	nopause  = flag.Bool("nopause", false, "after the default sweep, refill the expired records and sweep again with no pause")
	keep     = flag.Bool("keep", false, "keep the schema (its name is printed)")
	poolSize = flag.Int("conns", 16, "pool size")
)

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sweepbench_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	if *keep {
		log.Printf("schema %s (kept)", schema)
	} else {
		defer func() {
			if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				log.Printf("drop schema %s: %v", schema, err)
			}
		}()
	}
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(*poolSize)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	var version string
	_ = pool.QueryRow(ctx, "SHOW server_version").Scan(&version)
	var sb string
	_ = pool.QueryRow(ctx, "SHOW shared_buffers").Scan(&sb)
	log.Printf("PostgreSQL %s, shared_buffers %s; %d records, %d expired, %d users", version, sb, *rows, *expired, *users)

	if err := fill(ctx, pool); err != nil {
		return err
	}
	if err := explain(ctx, pool); err != nil {
		return err
	}
	st := pgstore.New(pool)

	load := newLoad(st, *rows, *expired)
	log.Printf("warm-up: 10s of load at %d/s", *rate)
	load.run(ctx, 10*time.Second, nil)

	log.Printf("baseline: %v of load at %d/s", *phase, *rate)
	base := load.run(ctx, *phase, nil)
	base.print("baseline")

	sw := sweepUnderLoad(ctx, st, load, sweeper.Config{}, base)
	if err := tableStats(ctx, pool); err != nil {
		return err
	}
	log.Printf("baseline again, after the sweep: %v of load at %d/s", *phase, *rate)
	after := load.run(ctx, *phase, nil)
	after.print("after sweep")
	ratios("after sweep / baseline", base, after)
	_ = sw

	if *nopause {
		// The swept records again: the same keys and times, past retention.
		if _, err := pool.Exec(ctx, fillSQL(1, *expired)); err != nil {
			return err
		}
		log.Printf("refilled %d expired records", *expired)
		sweepUnderLoad(ctx, st, load, sweeper.Config{Pause: -1}, base)
	}
	start := time.Now()
	if _, err := pool.Exec(ctx, "VACUUM idempotency_keys"); err != nil {
		return err
	}
	log.Printf("VACUUM after the sweep: %v", time.Since(start).Round(time.Millisecond))
	return tableStats(ctx, pool)
}

// fillSQL inserts records lo to hi of the table. Record i of -rows is
// created at an even spacing such that exactly the oldest -expired are past
// a 48h TTL, so the expired ones are the first inserted, as in a table that
// grew over time.
func fillSQL(lo, hi int) string {
	return fmt.Sprintf(`
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at,
        response_code, response_headers, response_body, resource_type, resource_id, created_at, expires_at)
SELECT 'user-' || (i %% %[3]d), md5(i::text), 'POST', '/v1/transactions', sha256(i::text::bytea), 1,
       s.status, 1, md5('t' || i)::uuid, c.t, c.t + interval '30 seconds',
       CASE WHEN s.status = 'COMPLETED' THEN 201 END,
       CASE WHEN s.status = 'COMPLETED' THEN ('{"Content-Type":["application/json"],"Location":["/v1/transactions/' || i || '"]}')::jsonb END,
       CASE WHEN s.status = 'COMPLETED' THEN convert_to('{"id":"' || i || '","status":"settled","source_currency":"EUR","target_currency":"USD","amount":"100.00","rate":"1.0842","created_at":"' || c.t || '"}', 'UTF8') END,
       CASE WHEN s.status = 'COMPLETED' THEN 'transactions' END,
       CASE WHEN s.status = 'COMPLETED' THEN i::text END,
       c.t, c.t + interval '48 hours'
  FROM generate_series(%[4]d, %[5]d) AS i,
       LATERAL (SELECT now() - interval '48 hours' * %[1]d / (%[1]d - %[2]d) * (1 - i::float8 / %[1]d)) AS c(t),
       LATERAL (SELECT CASE WHEN i %% 50 = 0 THEN 'PROCESSING' WHEN i %% 20 = 0 THEN 'FAILED' ELSE 'COMPLETED' END) AS s(status)`,
		*rows, *expired, *users, lo, hi)
}

// fill loads the table with its indexes dropped, then builds them, as a
// restore would: the same table and indexes as a table that grew, faster.
func fill(ctx context.Context, pool *pgxpool.Pool) error {
	start := time.Now()
	if _, err := pool.Exec(ctx, `ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
DROP INDEX idempotency_keys_expires_at_idx`); err != nil {
		return err
	}
	const chunk = 1_000_000
	for lo := 1; lo <= *rows; lo += chunk {
		hi := min(lo+chunk-1, *rows)
		q := fillSQL(lo, hi)
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		log.Printf("filled %d records (%v)", hi, time.Since(start).Round(time.Second))
	}
	t := time.Now()
	if _, err := pool.Exec(ctx, `SET maintenance_work_mem = '512MB';
ALTER TABLE idempotency_keys ADD PRIMARY KEY (scope, idempotency_key);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
RESET maintenance_work_mem`); err != nil {
		return err
	}
	log.Printf("indexes built in %v", time.Since(t).Round(time.Second))
	t = time.Now()
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE idempotency_keys`); err != nil {
		return err
	}
	log.Printf("VACUUM ANALYZE in %v; fill total %v", time.Since(t).Round(time.Second), time.Since(start).Round(time.Second))
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE expires_at <= now()`).Scan(&n); err != nil {
		return err
	}
	log.Printf("expired now: %d", n)
	return tableStats(ctx, pool)
}

func tableStats(ctx context.Context, pool *pgxpool.Pool) error {
	var table, idx, pk string
	var live, dead int64
	err := pool.QueryRow(ctx, `
SELECT pg_size_pretty(pg_table_size('idempotency_keys')),
       pg_size_pretty(pg_relation_size('idempotency_keys_pkey')),
       pg_size_pretty(pg_relation_size('idempotency_keys_expires_at_idx')),
       n_live_tup, n_dead_tup
  FROM pg_stat_user_tables WHERE relid = 'idempotency_keys'::regclass`).Scan(&table, &pk, &idx, &live, &dead)
	if err != nil {
		return err
	}
	log.Printf("table %s, primary key %s, expires_at index %s; live tuples ≈%d, dead ≈%d", table, pk, idx, live, dead)
	return nil
}

// explain prints the plan of one batch (pgstore's statement), run and
// rolled back.
func explain(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
DELETE FROM idempotency_keys
 WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM idempotency_keys
          WHERE expires_at <= now()
            AND (status <> 'PROCESSING' OR lease_expires_at <= now())
          ORDER BY expires_at
          LIMIT 1000
            FOR UPDATE SKIP LOCKED))
RETURNING scope, idempotency_key`)
	if err != nil {
		return err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	log.Printf("one batch of 1000, EXPLAIN ANALYZE (rolled back):\n    %s", strings.Join(lines, "\n    "))
	return nil
}

// sweepResult is what one sweep did.
type sweepResult struct {
	name     string
	deleted  int
	batches  []time.Duration
	sweeping time.Duration // the time the sweep ran: its windows, not the ones between
	wall     time.Duration
	wal      int64 // bytes of WAL in its windows, the whole server's
}

func (s sweepResult) print() {
	// The first and the last tenth of the batches: a batch slows down as
	// the dead index entries of the batches before it pile up.
	tenth := max(len(s.batches)/10, 1)
	first := pct(slices.Clone(s.batches[:tenth]), 50)
	last := pct(slices.Clone(s.batches[len(s.batches)-tenth:]), 50)
	sorted := slices.Clone(s.batches)
	log.Printf("%s: deleted %d in %v of sweeping (%v wall clock); %d batches: p50 %v, p99 %v, max %v; first tenth p50 %v, last tenth p50 %v; %.0f records/s",
		s.name, s.deleted, s.sweeping.Round(time.Millisecond), s.wall.Round(time.Millisecond), len(s.batches),
		pct(sorted, 50), pct(sorted, 99), pct(sorted, 100), first, last,
		float64(s.deleted)/s.sweeping.Seconds())
}

// sweepUnderLoad runs one sweeper round in windows of -window, alternating
// with windows without it, while the load runs; it compares the latencies
// of the two kinds of window, so that whatever else the machine does hits
// both alike.
func sweepUnderLoad(ctx context.Context, ks *pgstore.Store, l *load, cfg sweeper.Config, base *stats) sweepResult {
	res := sweepResult{name: "sweep (batch 1000, pause 100ms)"}
	if cfg.Pause < 0 {
		res.name = "sweep (batch 1000, no pause)"
	}
	var mu sync.Mutex
	cfg.ObserveFunc = func(b sweeper.Batch) {
		if b.Err == nil {
			mu.Lock()
			res.batches = append(res.batches, b.Duration)
			mu.Unlock()
		}
	}
	sw, err := sweeper.New(ks, cfg)
	if err != nil {
		log.Fatal(err)
	}
	var on atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		defer func() { res.wall = time.Since(start) }()
		for {
			time.Sleep(*window) // a window without the sweep
			wctx, cancel := context.WithTimeout(ctx, *window)
			walStart := l.wal(ctx)
			on.Store(true)
			t := time.Now()
			n, err := sw.Once(wctx)
			res.sweeping += time.Since(t)
			on.Store(false)
			res.wal += l.wal(ctx) - walStart
			cancel()
			res.deleted += n
			switch {
			case err == nil: // the round came back short: all swept
				return
			case !errors.Is(err, context.DeadlineExceeded):
				log.Printf("sweep: %v", err)
				return
			}
		}
	}()
	log.Printf("%s in %v windows, under load at %d/s", res.name, *window, *rate)
	st := l.run(ctx, 0, done, &on)
	// Split the phase's time and WAL between the two kinds of window.
	total := st.elapsed * st.walPerSec
	st.on.elapsed = res.sweeping.Seconds()
	st.on.walPerSec = float64(res.wal) / res.sweeping.Seconds()
	st.elapsed -= st.on.elapsed
	st.walPerSec = (total - float64(res.wal)) / st.elapsed
	st.print("windows without the sweep")
	st.on.print("windows with the sweep")
	ratios("with / without the sweep", st, st.on)
	ratios("with the sweep / baseline", base, st.on)
	res.print()
	return res
}

// load is an open-loop mix of Gets of live keys and claims of new ones.
type load struct {
	store          *pgstore.Store
	rows, expired  int
	hash           []byte
	claimsInFlight sync.WaitGroup
}

func newLoad(st *pgstore.Store, rows, expired int) *load {
	h := sha256.Sum256([]byte("bench"))
	return &load{store: st, rows: rows, expired: expired, hash: h[:]}
}

// stats are the latencies of one phase; with a sweep in windows, of the
// windows without it, and on those of the windows with it.
type stats struct {
	mu                   sync.Mutex
	get, claim, complete []time.Duration
	errors               int
	elapsed              float64 // seconds
	walPerSec            float64 // bytes of WAL a second, the whole server's
	on                   *stats
}

// wal is the server's WAL position in bytes.
func (l *load) wal(ctx context.Context) int64 {
	var n int64
	if err := l.store.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&n); err != nil {
		log.Printf("wal position: %v", err)
	}
	return n
}

// run sends rate requests a second, each on a goroutine of its own (open
// loop: a slow request never delays the next), until d has passed or stop
// is closed.
func (l *load) run(ctx context.Context, d time.Duration, stop <-chan struct{}, sweeping ...*atomic.Bool) *stats {
	st := &stats{on: &stats{}}
	pick := func() *stats { // the stats of a request that starts now
		if len(sweeping) > 0 && sweeping[0].Load() {
			return st.on
		}
		return st
	}
	walStart := l.wal(ctx)
	interval := time.Second / time.Duration(*rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var end <-chan time.Time
	if d > 0 {
		end = time.After(d)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-end:
		case <-stop:
		case <-tick.C:
			to := pick()
			if i%2 == 0 {
				wg.Go(func() { l.get(ctx, to) })
			} else {
				wg.Go(func() { l.claim(ctx, to) })
			}
			continue
		}
		break
	}
	wg.Wait()
	st.elapsed = time.Since(start).Seconds()
	st.walPerSec = float64(l.wal(ctx)-walStart) / time.Since(start).Seconds()
	return st
}

func (l *load) get(ctx context.Context, st *stats) {
	i := l.expired + 1 + mrand.IntN(l.rows-l.expired)
	user := "user-" + strconv.Itoa(i%*users)
	key := fmt.Sprintf("%x", md5.Sum([]byte(strconv.Itoa(i))))
	t := time.Now()
	_, err := l.store.Get(ctx, user, key)
	if errors.Is(err, store.ErrNotFound) {
		err = nil // expired and swept meanwhile: still a read
	}
	st.add(&st.get, time.Since(t), err)
}

func (l *load) claim(ctx context.Context, st *stats) {
	c := store.Claim{
		Scope: "user-" + strconv.Itoa(mrand.IntN(*users)),
		Key:   "bench-" + uuid.NewString(),
		Fingerprint: store.Fingerprint{
			Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/transactions", Hash: l.hash,
		},
		Token: uuid.NewString(),
		Lease: 30 * time.Second,
		TTL:   48 * time.Hour,
	}
	t := time.Now()
	_, inserted, err := l.store.Insert(ctx, c)
	st.add(&st.claim, time.Since(t), err)
	if err != nil || !inserted {
		return
	}
	t = time.Now()
	err = l.store.Complete(ctx, store.Attempt{Scope: c.Scope, Key: c.Key, Token: c.Token},
		store.Response{StatusCode: 201, Body: []byte(`{"id":"x","status":"settled"}`)})
	st.add(&st.complete, time.Since(t), err)
}

func (st *stats) add(to *[]time.Duration, d time.Duration, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		st.errors++
		return
	}
	*to = append(*to, d)
}

func (st *stats) print(name string) {
	log.Printf("%s (%.0fs): get p50 %v p99 %v (n=%d) | claim p50 %v p99 %v (n=%d) | complete p50 %v p99 %v (n=%d) | errors %d | WAL %.2f MB/s",
		name, st.elapsed,
		pct(st.get, 50), pct(st.get, 99), len(st.get),
		pct(st.claim, 50), pct(st.claim, 99), len(st.claim),
		pct(st.complete, 50), pct(st.complete, 99), len(st.complete), st.errors, st.walPerSec/1e6)
}

func ratios(name string, base, other *stats) {
	r := func(a, b []time.Duration, p float64) float64 {
		return float64(pct(b, p)) / float64(pct(a, p))
	}
	log.Printf("%s: get p50 ×%.2f p99 ×%.2f | claim p50 ×%.2f p99 ×%.2f | complete p50 ×%.2f p99 ×%.2f",
		name, r(base.get, other.get, 50), r(base.get, other.get, 99),
		r(base.claim, other.claim, 50), r(base.claim, other.claim, 99),
		r(base.complete, other.complete, 50), r(base.complete, other.complete, 99))
}

// pct is the p-th percentile (nearest rank) of ds, which it sorts.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[max(i, 0)].Round(time.Microsecond)
}

func init() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: scripts/test-postgres.sh go run ./cmd/internal/sweepbench [flags]\n")
		flag.PrintDefaults()
	}
}
