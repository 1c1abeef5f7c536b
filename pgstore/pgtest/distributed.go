package pgtest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The rules a schema and its statements follow so that Citus can
// distribute every table by user (docs/operations.md, "Running on Citus"):
// checked here on PostgreSQL, since Citus itself is not at hand.

// Distributed maps each table distributed by user to its distribution
// column: the key table's and the wallet's. A table not listed is a
// reference table (copied to every node) or bookkeeping.
var Distributed = map[string]string{
	"idempotency_keys": "scope",
	"users":            "id",
	"balances":         "user_id",
	"deposits":         "user_id",
	"transactions":     "user_id",
	"payouts":          "user_id",
	"ledger_entries":   "user_id",
}

// SchemaViolations reads the tables of pool's schema that Distributed
// names (the partitions of a partitioned one aside) and returns what keeps
// Citus from distributing them by user: a distribution column of another
// type than the others, a primary key or unique index without it, a foreign
// key between distributed tables that does not hold it on both sides, or
// one from any other table to a distributed table.
func SchemaViolations(t testing.TB, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	collect := func(sql string, args ...any) {
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("read the catalog: %v", err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("read the catalog: %v", err)
		}
		out = append(out, found...)
	}
	var tables, columns []string
	for table, column := range Distributed {
		tables, columns = append(tables, table), append(columns, column)
	}
	// dist is every distributed table of the schema, with the number of its
	// distribution column; partitions are checked through their parent.
	const dist = `
WITH dist AS (
    SELECT c.oid, c.relname, a.attnum, a.atttypid
      FROM unnest($1::text[], $2::text[]) AS d (tbl, col)
      JOIN pg_class c ON c.relname = d.tbl AND c.relnamespace = current_schema()::regnamespace
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = d.col)
`
	collect(dist+`
SELECT format('%s.%s is %s, not %s as in %s', d.relname, a.attname, format_type(d.atttypid, NULL), format_type(f.atttypid, NULL), f.relname)
  FROM dist d JOIN pg_attribute a ON a.attrelid = d.oid AND a.attnum = d.attnum
 CROSS JOIN (SELECT relname, atttypid FROM dist ORDER BY relname <> 'idempotency_keys', relname LIMIT 1) AS f
 WHERE d.atttypid <> f.atttypid`, tables, columns)
	collect(dist+`
SELECT format('unique index %s on %s lacks %s', i.indexrelid::regclass, d.relname, a.attname)
  FROM dist d JOIN pg_index i ON i.indrelid = d.oid
  JOIN pg_attribute a ON a.attrelid = d.oid AND a.attnum = d.attnum
 WHERE i.indisunique AND NOT d.attnum = ANY (i.indkey)`, tables, columns)
	collect(dist+`
SELECT format('foreign key %s of %s to %s does not hold the distribution column on both sides', con.conname, con.conrelid::regclass, con.confrelid::regclass)
  FROM pg_constraint con
  JOIN dist ref ON ref.oid = con.confrelid
  LEFT JOIN dist src ON src.oid = con.conrelid
 WHERE con.contype = 'f' AND con.conparentid = 0
   AND (src.oid IS NULL
        OR array_position(con.conkey, src.attnum) IS NULL
        OR array_position(con.conkey, src.attnum) IS DISTINCT FROM array_position(con.confkey, ref.attnum))`, tables, columns)
	return out
}

var (
	space       = regexp.MustCompile(`\s+`)
	tableRef    = regexp.MustCompile(`\b(?:from|into|update|join)\s+([a-z_][a-z0-9_]*)`)
	userFilter  = regexp.MustCompile(`\b(?:user_id|scope|id)\s*=\s*\$\d+`)
	insertUser  = regexp.MustCompile(`\binsert into ([a-z_][a-z0-9_]*)\s*\(([^)]*)\)`)
	control     = regexp.MustCompile(`^(?:begin|commit|rollback|savepoint|release|set local|select 1$)`)
	unsupported = regexp.MustCompile(`\bset_config\s*\(`)
)

// StatementViolation says why sql, a statement a request runs, would need
// more than one shard of a table distributed by user, or would not bound
// its wait on the shard that holds its rows; "" when it is routed by its
// user. A statement that names a distributed table must filter it by its
// distribution column equal to a parameter, or insert rows that name it.
// Wait limits are set with SET LOCAL, never set_config, which Citus does
// not pass on to the workers.
func StatementViolation(sql string) string {
	s := strings.TrimSpace(space.ReplaceAllString(strings.ToLower(sql), " "))
	if unsupported.MatchString(s) {
		return "sets a setting with set_config, which Citus keeps on the coordinator: use SET LOCAL"
	}
	if control.MatchString(s) {
		return ""
	}
	var named []string
	for _, m := range tableRef.FindAllStringSubmatch(s, -1) {
		if _, ok := Distributed[m[1]]; ok {
			named = append(named, m[1])
		}
	}
	if len(named) == 0 || userFilter.MatchString(s) {
		return ""
	}
	for _, m := range insertUser.FindAllStringSubmatch(s, -1) {
		for _, col := range strings.Split(m[2], ",") {
			if strings.TrimSpace(col) == Distributed[m[1]] {
				return ""
			}
		}
	}
	return fmt.Sprintf("reads or writes %s without naming its user: every shard", strings.Join(named, ", "))
}

// Recorder is a pgx tracer that records the text of every statement a
// pool runs, for StatementViolation. Its zero value records.
type Recorder struct {
	mu  sync.Mutex      // guards sql
	sql map[string]bool // the distinct statements
}

// TraceQueryStart records data.SQL.
func (r *Recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.add(data.SQL)
	return ctx
}

// TraceQueryEnd does nothing.
func (r *Recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing; TraceBatchQuery records each statement.
func (r *Recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records data.SQL.
func (r *Recorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	r.add(data.SQL)
}

// TraceBatchEnd does nothing.
func (r *Recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *Recorder) add(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sql == nil {
		r.sql = map[string]bool{}
	}
	r.sql[sql] = true
}

// Statements returns the distinct statements recorded, in no order.
func (r *Recorder) Statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.sql))
	for s := range r.sql {
		out = append(out, s)
	}
	return out
}
