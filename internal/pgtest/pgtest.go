// Package pgtest gives each test its own schema in a real PostgreSQL.
//
// The database is DATABASE_URL, by default postgres://postgres@127.0.0.1:5432/postgres.
// A test never skips for want of a database: it fails and says what to do.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
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

// Schema creates a fresh schema, dropped when the test ends, and returns
// its name.
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
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, URL())
		if err != nil {
			t.Errorf("drop test schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	return schema
}

// SchemaURL returns a connection string for the test database whose
// search_path is schema: for a server process under test.
func SchemaURL(t testing.TB, schema string) string {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil || u.Scheme == "" {
		return URL() + " search_path=" + schema // a keyword/value connection string
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Pool returns a pool on a fresh schema (see Schema) with at most maxConns
// connections, closed when the test ends.
func Pool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	schema := Schema(t)
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatalf("parse DATABASE_URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the schema's drop: cleanups run last-in first-out
	return pool
}
