package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"

	"github.com/idem-dev/idem/sqlstore"
)

// openDB opens pgx's database/sql driver on a fresh schema. Like pgstore's
// test pools it has fewer connections than the suite's 64 racers, so that
// many tests in parallel stay within the server's max_connections.
func openDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.SchemaURL(t, pgtest.Schema(t)))
	require.NoError(t, err)
	db.SetMaxOpenConns(24)
	t.Cleanup(func() { db.Close() })
	return db
}

// newStore returns a migrated store on a fresh schema, with opts.
func newStore(t *testing.T, opts sqlstore.Config) (*sqlstore.Store, *sql.DB) {
	t.Helper()
	db := openDB(t)
	_, err := sqlstore.Migrate(context.Background(), db, opts)
	require.NoError(t, err)
	s, err := sqlstore.New(db, opts)
	require.NoError(t, err)
	return s, db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t, sqlstore.Config{})
		return s
	})
}

func TestConformanceOtherTable(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t, sqlstore.Config{Table: "request_keys"})
		return s
	})
}

// TestMigrateExcludesPgstore holds the migration lock pgstore's migrations
// take on the schema's migrations table: sqlstore's PostgreSQL dialect,
// sharing that table, waits for it instead of migrating beside it.
func TestMigrateExcludesPgstore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDB(t)
	held, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = held.Rollback() }()
	_, err = held.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext($1))`,
		sqlstore.MigrationsTable(sqlstore.DefaultTable))
	require.NoError(t, err)
	var holder int
	require.NoError(t, held.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&holder))

	done := make(chan error, 1)
	go func() { _, err := sqlstore.Migrate(ctx, db, sqlstore.Config{}); done <- err }()
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("sqlstore migrated while pgstore's migration lock was held (err %v)", err)
		case <-time.After(10 * time.Millisecond):
			require.NoError(t, db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND pid <> $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND (classid, objid) = (SELECT classid, objid FROM pg_locks WHERE pid = $1 AND locktype = 'advisory'))`,
				holder).Scan(&waiting))
		}
	}
	require.NoError(t, held.Rollback())
	require.NoError(t, <-done)
}
