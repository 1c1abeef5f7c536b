// Command consolescale measures the operator console on a large key table:
// how long a record's page and the searches take with -keys records, and
// the plans of the statements they send (docs/console.md, "Indexes, and a
// record page at 10 million keys").
//
//	scripts/test-postgres.sh go run ./cmd/internal/consolescale
//	DATABASE_URL=postgres://… go run ./cmd/internal/consolescale -keys 1000000
//
// It migrates a throwaway schema of DATABASE_URL, fills its key table by
// INSERT … SELECT generate_series (the migration's indexes dropped during
// the fill and rebuilt after it), then serves package console on
// pgstore over HTTP, signs in, and loads pages as a browser would: a
// record's page for -samples keys, each search by key, scope, state,
// unfinished and unknown outcome, and the overview. It records the
// statements each page sends and prints their EXPLAIN (ANALYZE, BUFFERS)
// plans, flagging a sequential scan of the key table, and the pages'
// median and slowest times. It drops the schema. It is not part of
// `make test`: at the default size it needs about 8 GB of disk and a
// quarter of an hour.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/console"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

var (
	keys    = flag.Int("keys", 10_000_000, "records in the key table")
	users   = flag.Int("users", 100_000, "distinct scopes")
	audits  = flag.Int("audits", 100_000, "operator actions in the audit log")
	samples = flag.Int("samples", 21, "record pages loaded")
	keep    = flag.Bool("keep", false, "keep the schema (its name is printed)")
)

// fill inserts records $1 to $2 - 1: record i is key 'k-<i>' of scope
// 'user-<i mod $3>', created over the last 48 hours in the order of i.
// Of every 10,000: 9,689 completed (201), 300 failed, 10 completed with a
// 409 (unknown outcomes), one in flight; and one of every 10,000 is an
// unfinished record (a recovery point, failed, with a bank key).
const fill = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at,
        response_code, response_headers, response_body, resource_type, resource_id,
        recovery_point, provider_keys, created_at, expires_at)
SELECT 'user-' || (i % $3), 'k-' || i, 'POST', '/v1/payouts', sha256(i::text::bytea), 1,
       s.status, 1, md5(i::text)::uuid, c.t, c.t + interval '30 seconds',
       s.code, CASE WHEN s.code IS NOT NULL THEN '{"Content-Type":["application/json"]}'::jsonb END,
       CASE WHEN s.code IS NOT NULL THEN convert_to(format('{"id":"%s","status":"paid"}', md5('p' || i)::uuid), 'UTF8') END,
       CASE WHEN s.code = 201 THEN 'payouts' END, CASE WHEN s.code = 201 THEN md5('p' || i)::uuid::text END,
       s.point, CASE WHEN s.point IS NOT NULL THEN jsonb_build_object('bank', 'bk-' || i) END,
       c.t, c.t + interval '48 hours'
  FROM generate_series($1::bigint, $2::bigint - 1) AS i,
       LATERAL (SELECT now() - interval '48 hours' * ($4::bigint - i) / $4::bigint) AS c (t),
       LATERAL (SELECT CASE WHEN i % 10000 = 0 THEN 'PROCESSING'
                            WHEN i % 10000 = 1 OR i % 100 < 3 THEN 'FAILED'
                            ELSE 'COMPLETED' END,
                       CASE WHEN i % 10000 = 0 OR i % 10000 = 1 OR i % 100 < 3 THEN NULL
                            WHEN i % 1000 = 5 THEN 409 ELSE 201 END,
                       CASE WHEN i % 10000 = 1 THEN 'outcome-unknown' END) AS s (status, code, point)`

// fillAudit writes $1 operator actions on keys of the table.
const fillAudit = `
INSERT INTO idempotency_keys_audit (actor, action, reason, scope, idempotency_key, before, after)
SELECT 'ann', 'reopen: reopened the key', 'INC-' || i, 'user-' || (i * 97 % $2), 'k-' || (i * 97), 'COMPLETED', 'FAILED'
  FROM generate_series(1, $1::bigint) AS i`

func main() {
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		log.Fatalf("connect %s: %v", pgtest.URL(), err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "consolescale_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		log.Fatal(err)
	}
	drop := func() {
		if *keep {
			log.Printf("schema %s (kept)", schema)
			return
		}
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			log.Printf("drop schema %s: %v", schema, err)
		}
	}
	defer drop()
	if err := run(ctx, schema); err != nil {
		drop()
		log.Fatal(err)
	}
}

func run(ctx context.Context, schema string) error {
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	rec := &recorder{}
	cfg.ConnConfig.Tracer = rec
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pgstore.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := fillTable(ctx, pool); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "consolescale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("consolescale-admin-token-0123456789"), 0o600); err != nil {
		return err
	}
	c, err := console.New(console.Config{
		Name: "consolescale", Store: pgstore.New(pool), TokenFile: token,
		OutcomeUnknownFunc: func(r *store.Record) bool { return r.Response != nil && r.Response.StatusCode == http.StatusConflict },
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", c))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b := &browser{base: srv.URL + "/console/"}
	if err := b.signIn(); err != nil {
		return err
	}

	var (
		pages []page
		times []time.Duration
	)
	for k := range *samples {
		i := (*keys - 1) * k / max(*samples-1, 1)
		switch k { // an unfinished record, an unknown outcome, one in flight
		case 1:
			i = 10001
		case 2:
			i = 1005
		case 3:
			i = 20000
		}
		q := url.Values{"scope": {fmt.Sprintf("user-%d", i%*users)}, "key": {fmt.Sprintf("k-%d", i)}}
		p := page{name: "record page, key k-" + fmt.Sprint(i), path: "key?" + q.Encode()}
		if err := b.load(&p, rec); err != nil {
			return err
		}
		times = append(times, p.took)
		if k < 4 {
			pages = append(pages, p)
		}
	}
	slices.Sort(times)
	log.Printf("record page, %d keys: median %v, slowest %v", len(times), times[len(times)/2].Round(10*time.Microsecond), times[len(times)-1].Round(10*time.Microsecond))

	mid := *keys / 2
	for _, p := range []page{
		{name: "search by key", path: "keys?key=" + fmt.Sprintf("k-%d", mid+7)},
		{name: "search by scope", path: "keys?scope=" + fmt.Sprintf("user-%d", mid%*users)},
		{name: "search by state (failed)", path: "keys?state=failed"},
		{name: "search by state (in flight)", path: "keys?state=processing"},
		{name: "search by state (completed), older than 24h", path: "keys?state=completed&older=24h"},
		{name: "search: unfinished", path: "keys?state=unfinished"},
		{name: "search: unknown outcomes", path: "keys?state=unknown"},
		{name: "search by age only (older than 1h)", path: "keys?older=1h"},
		{name: "overview", path: ""},
	} {
		if err := b.load(&p, rec); err != nil {
			return err
		}
		pages = append(pages, p)
	}
	for _, p := range pages {
		fmt.Printf("\n## %s: %v\n", p.name, p.took.Round(10*time.Microsecond))
		for _, st := range p.statements {
			if err := explain(ctx, pool, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillTable fills the key table and the audit log, building the key
// table's secondary indexes after the rows, as a migration on a full table
// would, then analyzes.
func fillTable(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes
	  WHERE schemaname = current_schema() AND tablename = 'idempotency_keys' AND indexname <> 'idempotency_keys_pkey'`)
	if err != nil {
		return err
	}
	var defs [][2]string
	for rows.Next() {
		var d [2]string
		if err := rows.Scan(&d[0], &d[1]); err != nil {
			return err
		}
		defs = append(defs, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range defs {
		if _, err := pool.Exec(ctx, "DROP INDEX "+d[0]); err != nil {
			return err
		}
	}
	start := time.Now()
	const batch = 1_000_000
	for from := 0; from < *keys; from += batch {
		to := min(from+batch, *keys)
		if _, err := pool.Exec(ctx, fill, from, to, *users, *keys); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		log.Printf("filled %d of %d keys (%v)", to, *keys, time.Since(start).Round(time.Second))
	}
	for _, d := range defs {
		t := time.Now()
		if _, err := pool.Exec(ctx, d[1]); err != nil {
			return err
		}
		log.Printf("built %s (%v)", d[0], time.Since(t).Round(time.Second))
	}
	if _, err := pool.Exec(ctx, fillAudit, *audits, *users); err != nil {
		return fmt.Errorf("fill audit: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) idempotency_keys, idempotency_keys_audit"); err != nil {
		return err
	}
	var size string
	if err := pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))`).Scan(&size); err != nil {
		return err
	}
	log.Printf("key table with its indexes: %s", size)
	return nil
}

// page is one page of the console, loaded once: how long it took and the
// statements it sent.
type page struct {
	name, path string
	took       time.Duration
	statements []statement
}

type browser struct {
	base   string
	client *http.Client
}

func (b *browser) signIn() error {
	jar, _ := cookiejar.New(nil)
	b.client = &http.Client{Jar: jar}
	form := url.Values{"name": {"consolescale"}, "token": {"consolescale-admin-token-0123456789"}}
	req, _ := http.NewRequest(http.MethodPost, b.base+"login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", strings.TrimSuffix(b.base, "/console/"))
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(jar.Cookies(resp.Request.URL)) == 0 {
		return fmt.Errorf("sign in: %s", resp.Status)
	}
	return nil
}

// load loads p, recording its statements.
func (b *browser) load(p *page, rec *recorder) error {
	rec.start()
	start := time.Now()
	resp, err := b.client.Get(b.base + p.path)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.took = time.Since(start)
	p.statements = rec.stop()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `class="flash error"`) {
		return fmt.Errorf("%s: %s\n%s", p.path, resp.Status, body)
	}
	return nil
}

// statement is one statement a page sent, with its arguments.
type statement struct {
	sql  string
	args []any
}

// recorder is a pgx tracer that records the statements sent between start
// and stop.
type recorder struct {
	mu  sync.Mutex
	on  bool
	got []statement
}

func (r *recorder) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.got = true, nil
}

func (r *recorder) stop() []statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.got
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.got = append(r.got, statement{data.SQL, data.Args})
	}
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// explain prints st's plan, run: EXPLAIN (ANALYZE, BUFFERS) with its
// arguments, as the store sent it.
func explain(ctx context.Context, pool *pgxpool.Pool, st statement) error {
	sql := strings.Join(strings.Fields(st.sql), " ")
	fmt.Printf("\n    %s\n", sql)
	rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+st.sql, st.args...)
	if err != nil {
		return fmt.Errorf("explain %s: %w", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("explain %s: %w", sql, err)
	}
	for _, l := range lines {
		mark := ""
		if strings.Contains(l, "Seq Scan on idempotency_keys ") || strings.HasSuffix(l, "Seq Scan on idempotency_keys") {
			mark = "   <-- sequential scan of the key table"
		}
		fmt.Printf("    | %s%s\n", l, mark)
	}
	return nil
}
