// Package pgtest gives each test its own schema in a real PostgreSQL.
//
// The database is DATABASE_URL, by default postgres://postgres@127.0.0.1:5432/postgres.
// A test never skips for want of a database: it fails and says what to do.
//
// With PGBOUNCER=1 (scripts/with-pgbouncer.sh sets it) DATABASE_URL is a
// PgBouncer in transaction pooling mode, which keeps no session state: it
// refuses a search_path startup parameter, and a prepared statement made on
// one server connection is gone on the next. Each schema then lives in a
// database of its own name whose default search_path is that schema, and
// connections use pgx's cache_describe mode, which prepares nothing by name
// (pgstore.PgBouncerConfig).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the database used when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// URL returns the test database's URL.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Partitions is PG_PARTITIONS, the number of hash partitions by user the
// tests ask migrations for (pgstore.MigrateConfig.Partitions), 0 when
// unset: `make test-partitioned` runs the store's, the ledger's and
// paymentsd's tests on the partitioned schema with it. A value that is not
// a number fails the test.
func Partitions(t testing.TB) int {
	t.Helper()
	v := os.Getenv("PG_PARTITIONS")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("PG_PARTITIONS=%q is not a number of partitions", v)
	}
	return n
}

// Citus reports whether DATABASE_URL is a Citus coordinator with its
// workers (PG_CITUS=1, which scripts/test-citus.sh sets): the tests then
// distribute the tables they migrate, as `paymentsd migrate --citus`
// does, and `make test-citus` runs the store's, the wallet's and
// paymentsd's tests on them.
func Citus() bool { return os.Getenv("PG_CITUS") == "1" }

// PgBouncer reports whether DATABASE_URL is a PgBouncer in transaction
// pooling mode (PGBOUNCER=1).
func PgBouncer() bool { return os.Getenv("PGBOUNCER") == "1" }

// Schema creates a fresh schema, dropped when the test ends, and returns
// its name. Through PgBouncer the schema is in a database of the same name
// (see the package doc).
func Schema(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatalf("PostgreSQL is not reachable at %s: %v\n"+
			"Set DATABASE_URL to a PostgreSQL you may create schemas in, or run `make test`, "+
			"which starts a throwaway cluster from the local PostgreSQL binaries (install them: apt-get install postgresql).", URL(), err)
	}
	defer conn.Close(ctx)
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "test_" + hex.EncodeToString(b[:])
	if PgBouncer() {
		databaseSchema(t, conn, schema)
		return schema
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	cleanup(t, "drop test schema", func(ctx context.Context, conn *pgx.Conn) error { return dropSchema(ctx, conn, schema) })
	return schema
}

// cleanup runs drop on a connection of its own when the test ends, and
// reports its failure as what.
func cleanup(t testing.TB, what string, drop func(context.Context, *pgx.Conn) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, URL())
		if err == nil {
			defer conn.Close(ctx)
			err = drop(ctx, conn)
		}
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// dropSchema drops schema, its tables first, one statement each: a schema
// partitioned by user (PG_PARTITIONS) holds hundreds of relations, each a
// lock held to the end of the dropping transaction, and parallel tests
// dropping theirs at once ran out of the server's lock table
// (max_locks_per_transaction × max_connections): "out of shared memory".
func dropSchema(ctx context.Context, conn *pgx.Conn, schema string) error {
	rows, err := conn.Query(ctx, `
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition`, schema)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, table := range tables {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+table+" CASCADE"); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	return err
}

// databaseSchema creates schema in a database of its own name, the
// database's default search_path, and drops the database when the test
// ends.
func databaseSchema(t testing.TB, conn *pgx.Conn, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sql := range []string{
		"CREATE DATABASE " + schema,
		"ALTER DATABASE " + schema + " SET search_path = " + schema,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("create test database: %v", err)
		}
	}
	cleanup(t, "drop test database", func(ctx context.Context, conn *pgx.Conn) error {
		// FORCE ends PgBouncer's idle server connections to it.
		_, err := conn.Exec(ctx, "DROP DATABASE "+schema+" WITH (FORCE)")
		return err
	})
	dbConn, err := pgx.Connect(ctx, SchemaURL(t, schema))
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	defer dbConn.Close(ctx)
	if _, err := dbConn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
}

// SchemaURL returns a connection string for the test database whose
// search_path is schema: for a server process under test. Through
// PgBouncer it names the schema's database instead, and asks pgx for a
// mode that prepares nothing by name (default_query_exec_mode=cache_describe).
func SchemaURL(t testing.TB, schema string) string {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil || u.Scheme == "" {
		if PgBouncer() {
			t.Fatalf("PGBOUNCER=1 needs DATABASE_URL in URL form, got a keyword/value string")
		}
		return URL() + " search_path=" + schema // a keyword/value connection string
	}
	q := u.Query()
	if PgBouncer() {
		u.Path = "/" + schema
		q.Set("default_query_exec_mode", "cache_describe")
	} else {
		q.Set("search_path", schema)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Pool returns a pool on a fresh schema (see Schema) with at most maxConns
// connections, closed when the test ends.
func Pool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool, _ := PoolURL(t, maxConns)
	return pool
}

// PoolURL is Pool, and the schema's connection string (see SchemaURL) for
// a process under test.
func PoolURL(t testing.TB, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := SchemaURL(t, Schema(t))
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse DATABASE_URL: %v", err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the schema's drop: cleanups run last-in first-out
	return pool, dsn
}
