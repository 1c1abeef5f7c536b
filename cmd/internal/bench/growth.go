package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
)

// preloadBody is the request every preloaded key was made with; its
// fingerprint is stored on each of those rows, so a replay of any of them
// with this body is answered from the record.
var preloadBody = transferBody(1000)

// preload fills the key table of db with COMPLETED records $5 to $6 - 1,
// as paymentsd would have stored them: the users of db in turn, a stored
// 201 with its headers and body each. The first $7 records are past
// retention, oldest first: created between 73 and 49 hours ago, so they
// expired between 25 hours and 1 hour ago; the others are created now and
// live for 48 hours. No record crosses its expiry during a run.
const preload = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at,
        response_code, response_headers, response_body, resource_type, resource_id, created_at, expires_at)
SELECT ($1::text[])[1 + i % $2], 'pre-' || i, 'POST', '/v1/transactions', $3, $4,
       'COMPLETED', 1, md5(i::text)::uuid, now(), now(),
       201,
       jsonb_build_object('Content-Type', jsonb_build_array('application/json'),
                          'Location', jsonb_build_array('/v1/transactions/' || md5('t' || i)::uuid)),
       convert_to(format('{"id":"%s","source_currency":"USD","target_currency":"EUR","amount":1000,"converted_amount":920,"rate":"0.92","status":"COMPLETED","created_at":"2026-01-01T00:00:00.000000Z"}',
                         md5('t' || i)::uuid), 'UTF8'),
       'transactions', md5('t' || i)::uuid::text, c.t, c.t + interval '48 hours'
  FROM generate_series($5::bigint, $6::bigint - 1) AS i,
       LATERAL (SELECT CASE WHEN i < $7::bigint
                            THEN now() - interval '49 hours' - interval '24 hours' * ($7::bigint - i) / greatest($7::bigint, 1)
                            ELSE now() END) AS c (t)`

// preloadKeys fills the key table of db with n COMPLETED records, the
// first expired of them past retention, in statements of a million rows;
// then it vacuums, analyzes and checkpoints, and returns the time it took.
func preloadKeys(ctx context.Context, db *database, n, expired int, logf func(string, ...any)) (time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, "/v1/transactions", bytes.NewReader(preloadBody))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	fp, err := idem.NewFingerprint(req, preloadBody)
	if err != nil {
		return 0, err
	}
	users := make([]string, len(db.users))
	for i, u := range db.users {
		users[i] = u.id
	}
	start := time.Now()
	const batch = 1_000_000
	for from := 0; from < n; from += batch {
		to := min(from+batch, n)
		if _, err := db.pool.Exec(ctx, preload, users, len(users), fp.Hash, fp.Version, from, to, expired); err != nil {
			return 0, fmt.Errorf("preload keys: %w", err)
		}
		logf("preloaded %d of %d keys (%v)", to, n, time.Since(start).Round(time.Second))
	}
	// Set the hint bits and the visibility map now, as autovacuum would
	// have long since on a table this old, and refresh the statistics.
	if _, err := db.pool.Exec(ctx, "VACUUM (ANALYZE) idempotency_keys"); err != nil {
		return 0, fmt.Errorf("vacuum: %w", err)
	}
	// Write it all out now, the server's buffers and the kernel's, so that
	// the writeback of gigabytes does not fall on the first measured rounds.
	_, _ = db.pool.Exec(ctx, "CHECKPOINT")
	syscall.Sync()
	return time.Since(start), nil
}

// keyTableSize is the size of db's key table with its indexes, for people.
func keyTableSize(ctx context.Context, db *database) (string, error) {
	var size string
	err := db.pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('idempotency_keys'))`).Scan(&size)
	if err != nil {
		return "", fmt.Errorf("key table size: %w", err)
	}
	return size, nil
}

// preloadedRequest is a replay of preloaded record i.
func preloadedRequest(db *database, i int) request {
	return request{user: &db.users[i%len(db.users)], key: "pre-" + strconv.Itoa(i), body: preloadBody}
}

// growth runs fresh and replay in both modes against a key table holding
// GrowthRows records and against an empty one, alternating.
func (r *runner) growth(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	machine := describeMachine()
	dbs := map[string]*database{}
	for _, name := range []string{"empty", "10M"} {
		db, err := newDatabase(ctx, cfg.DatabaseURL, "bench_growth", "", cfg.Users, 4)
		if err != nil {
			return nil, err
		}
		defer r.dispose(ctx, db)
		dbs[name] = db
	}
	if err := machine.fromDatabase(ctx, dbs["empty"].pool); err != nil {
		return nil, err
	}
	r.pgss = enablePgss(ctx, dbs["empty"].pool)
	r.cpu = newCPUMeter(ctx, dbs["empty"].pool)
	big := dbs["10M"]
	cfg.Logf("preloading %d keys", cfg.GrowthRows)
	took, err := preloadKeys(ctx, big, cfg.GrowthRows, 0, cfg.Logf)
	if err != nil {
		return nil, err
	}
	size, err := keyTableSize(ctx, big)
	if err != nil {
		return nil, err
	}
	cfg.Logf("preloaded %d keys in %v; the key table and its indexes take %s", cfg.GrowthRows, took.Round(time.Second), size)

	srv := map[string]*server{}
	for _, table := range []string{"empty", "10M"} {
		for _, mode := range paymentsdModes {
			// The replay cache off: the growth run measures the key
			// table's look-ups, which a cache would skip.
			s, err := r.startPaymentsd(ctx, "paymentsd-"+mode+"-"+table, mode, dbs[table], "--replay-cache-mb", "0")
			if err != nil {
				return nil, err
			}
			srv[mode+"@"+table] = s
		}
	}
	// Recent keys, completed during the run as retries find them, in both
	// tables; and, in the big one, any of its keys.
	seeds := map[string][]request{}
	for _, table := range []string{"empty", "10M"} {
		if seeds[table], err = seed(ctx, &variant{srv: srv["atomic-deferred@"+table], db: dbs[table]}, r.wl, cfg.ReplayKeys, cfg.Concurrency); err != nil {
			return nil, err
		}
	}
	recent := func(table string) func(*rand.Rand) request {
		return func(rnd *rand.Rand) request { return seeds[table][rnd.IntN(len(seeds[table]))] }
	}
	anyKey := func(rnd *rand.Rand) request { return preloadedRequest(big, rnd.IntN(cfg.GrowthRows)) }
	var vs []*variant
	for _, mode := range paymentsdModes {
		for _, table := range []string{"empty", "10M"} {
			vs = append(vs, &variant{name: "fresh-" + mode + "@" + table, kind: kindFresh, mode: mode,
				srv: srv[mode+"@"+table], db: dbs[table]})
		}
	}
	for _, mode := range paymentsdModes {
		vs = append(vs,
			&variant{name: "replay-" + mode + "@empty", kind: kindReplay, mode: mode, srv: srv[mode+"@empty"], db: dbs["empty"], replay: recent("empty")},
			&variant{name: "replay-" + mode + "@10M", kind: kindReplay, mode: mode, srv: srv[mode+"@10M"], db: big, replay: recent("10M")},
			&variant{name: "replay-any-" + mode + "@10M", kind: kindReplay, mode: mode, srv: srv[mode+"@10M"], db: big, replay: anyKey})
	}
	machine.LoadBefore = loadAvg()
	samples, err := r.rounds(ctx, vs)
	if err != nil {
		return nil, err
	}
	machine.LoadAfter = loadAvg()
	// The plans, after the load: the empty table has the run's keys by now.
	var explain strings.Builder
	explain.WriteString("# Key-table statements with and without 10 million rows (EXPLAIN ANALYZE, after the run)\n\n")
	for _, table := range []string{"empty", "10M"} {
		rq := seeds["empty"][0]
		if table == "10M" {
			rq = preloadedRequest(big, cfg.GrowthRows/2)
		}
		md, err := explainKeys(ctx, dbs[table], rq.key, rq.user.id)
		if err != nil {
			return nil, fmt.Errorf("explain: %w", err)
		}
		fmt.Fprintf(&explain, "## %s table\n\n%s", table, md)
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "growth-explain.md"), []byte(explain.String()), 0o644); err != nil {
		return nil, err
	}
	rep := newReport(cfg, machine, vs, samples)
	rep.Settings += fmt.Sprintf("; the 10M table was preloaded with %d COMPLETED keys in %v (%s with its indexes), "+
		"then synced to disk; replay picks among %d keys completed at the start of the run in each table (the retries "+
		"of recent requests), replay-any among all the preloaded keys of the 10M table at random (a working set far "+
		"larger than shared_buffers)", cfg.GrowthRows, took.Round(time.Second), size, cfg.ReplayKeys)
	return rep, rep.write(cfg.Out, "")
}

// explainKeys runs EXPLAIN (ANALYZE, BUFFERS) of the two key-table
// statements every request makes, the read of a record and the claim, on
// db, the claim in a transaction rolled back. It returns Markdown.
func explainKeys(ctx context.Context, db *database, key string, userID string) (string, error) {
	var out strings.Builder
	plan := func(title, sql string, args ...any) error {
		tx, err := db.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, args...)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "%s:\n\n```\n%s\n```\n\n", title, strings.Join(lines, "\n"))
		return nil
	}
	if err := plan("The read of a record (a replay's only key-table statement)",
		`SELECT status, response_body FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2`, userID, key); err != nil {
		return "", err
	}
	err := plan("The claim of a new key (rolled back)", `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at)
VALUES ($1, $2, 'POST', '/v1/transactions', $3, 1, 'PROCESSING', 1, gen_random_uuid(), now(), now(), now(), now() + interval '48 hours')
ON CONFLICT (scope, idempotency_key) DO NOTHING`, userID, "explain-"+key, make([]byte, 32))
	return out.String(), err
}
