package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// openDB opens a database file of the test's own.
func openDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sqlitestore.Open(filepath.Join(t.TempDir(), "idem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// newStore returns a migrated store on a database file of its own.
func newStore(t testing.TB) (*sqlitestore.Store, *sql.DB) {
	t.Helper()
	db := openDB(t)
	_, err := sqlitestore.Migrate(context.Background(), db)
	require.NoError(t, err)
	return sqlitestore.New(db), db
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t)
		return s
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OwnerOnly", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "keys.db")
		db, err := sqlitestore.Open(path)
		require.NoError(t, err)
		defer db.Close()
		_, err = sqlitestore.Migrate(ctx, db)
		require.NoError(t, err)
		for _, name := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(name)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s holds stored answers", filepath.Base(name))
		}
	})

	t.Run("SettingsOnEveryConnection", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		// Hold several connections at once, so each is a distinct one:
		// all but journal_mode are per-connection settings.
		var conns []*sql.Conn
		for range 3 {
			c, err := db.Conn(ctx)
			require.NoError(t, err)
			defer c.Close()
			conns = append(conns, c)
		}
		for i, c := range conns {
			var (
				journal            string
				synchronous, fkeys int
				busyTimeout        int
			)
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal), i)
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&synchronous), i)
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fkeys), i)
			require.NoError(t, c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busyTimeout), i)
			require.Equal(t, "wal", journal, i)
			require.Equal(t, 2, synchronous, "synchronous=FULL, connection %d", i)
			require.Equal(t, 1, fkeys, i)
			require.Equal(t, int(sqlitestore.DefaultBusyTimeout.Milliseconds()), busyTimeout, i)
		}
	})

	t.Run("TransactionsBeginImmediate", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		_, err := db.ExecContext(ctx, "CREATE TABLE t (x INTEGER)")
		require.NoError(t, err)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		// A deferred transaction would hold no lock before its first write;
		// this one holds the write lock already, so a second one cannot
		// begin.
		other, err := db.Conn(ctx)
		require.NoError(t, err)
		defer other.Close()
		_, err = other.ExecContext(ctx, "PRAGMA busy_timeout = 0")
		require.NoError(t, err)
		_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
		require.ErrorContains(t, err, "SQLITE_BUSY")
	})

	t.Run("RefusesMemory", func(t *testing.T) {
		t.Parallel()
		_, err := sqlitestore.Open(":memory:")
		require.ErrorContains(t, err, "in-memory databases are not supported")
		require.ErrorContains(t, err, "each connection")
		_, err = sqlitestore.Open("")
		require.ErrorContains(t, err, "empty path")
		_, err = sqlitestore.Open("file::memory:?cache=shared")
		require.ErrorContains(t, err, "not a URI")
	})

	t.Run("FileNameIsTakenLiterally", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "a?b#c%20d e.db")
		db, err := sqlitestore.Open(path)
		require.NoError(t, err)
		defer db.Close()
		_, err = sqlitestore.Migrate(ctx, db)
		require.NoError(t, err)
		_, err = os.Stat(path)
		require.NoError(t, err, "the file has exactly the name given")
	})

	t.Run("MissingDirectoryFails", func(t *testing.T) {
		t.Parallel()
		_, err := sqlitestore.Open(filepath.Join(t.TempDir(), "no", "such", "dir", "idem.db"))
		require.Error(t, err)
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Idempotent", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		applied, err := sqlitestore.Migrate(ctx, db)
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 4, 6, 7, 9}, applied)
		applied, err = sqlitestore.Migrate(ctx, db)
		require.NoError(t, err)
		require.Empty(t, applied, "a current schema is left alone")
	})

	t.Run("ScriptBuildsTheSameSchema", func(t *testing.T) {
		t.Parallel()
		migrated := openDB(t)
		_, err := sqlitestore.Migrate(ctx, migrated)
		require.NoError(t, err)

		script, err := sqlitestore.MigrationSQL()
		require.NoError(t, err)
		require.Contains(t, script, "CREATE TABLE idempotency_keys")
		scripted := openDB(t)
		_, err = scripted.ExecContext(ctx, script)
		require.NoError(t, err)
		require.Equal(t, schema(t, migrated), schema(t, scripted))
		applied, err := sqlitestore.Migrate(ctx, scripted)
		require.NoError(t, err)
		require.Empty(t, applied, "the script records what it applied")
	})

	t.Run("ConcurrentProcessesApplyOnce", func(t *testing.T) {
		t.Parallel()
		// Two *sql.DB on one file stand in for two processes starting
		// together: neither shares the other's connections.
		path := filepath.Join(t.TempDir(), "idem.db")
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			applied [][]int
		)
		for range 4 {
			db, err := sqlitestore.Open(path)
			require.NoError(t, err)
			defer db.Close()
			wg.Go(func() {
				a, err := sqlitestore.Migrate(ctx, db)
				require.NoError(t, err)
				mu.Lock()
				applied = append(applied, a)
				mu.Unlock()
			})
		}
		wg.Wait()
		var total []int
		for _, a := range applied {
			total = append(total, a...)
		}
		// Each applies in its own transaction: one process may apply the
		// first ones and another the rest, and report before it.
		slices.Sort(total)
		require.Equal(t, []int{1, 2, 3, 4, 6, 7, 9}, total, "exactly one process applies each migration")
	})
}

// schema lists the database's tables and indexes as SQLite recorded them.
func schema(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(),
		`SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out)
	return out
}
