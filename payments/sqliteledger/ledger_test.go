package sqliteledger_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments/ledgertest"
	"github.com/idem-dev/idem/payments/sqliteledger"
	"github.com/idem-dev/idem/sqlitestore"
)

// open returns a database file of the test's own, with the key table and
// the wallet's tables.
func open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sqlitestore.Open(filepath.Join(t.TempDir(), "wallet.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	_, err = sqlitestore.Migrate(ctx, db)
	require.NoError(t, err)
	_, err = sqliteledger.Migrate(ctx, db)
	require.NoError(t, err)
	return db
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		db := open(t)
		return ledgertest.Harness{Ledger: sqliteledger.New(db), Store: sqlitestore.New(db)}
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	applied, err := sqliteledger.Migrate(ctx, db)
	require.NoError(t, err)
	require.Empty(t, applied, "a current schema is left alone")
	var keyIndexes int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
	    WHERE type = 'index' AND tbl_name IN ('deposits', 'transactions') AND sql LIKE '%idempotency_key%'`).Scan(&keyIndexes))
	require.Zero(t, keyIndexes, "no index binds a key: it is plain data")

	script, err := sqliteledger.MigrationSQL()
	require.NoError(t, err)
	require.Contains(t, script, "CREATE UNIQUE INDEX transactions_minute_net")
	require.Contains(t, script, "CREATE UNIQUE INDEX deposits_minute_net")
	other, err := sqlitestore.Open(filepath.Join(t.TempDir(), "script.db"))
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ExecContext(ctx, script)
	require.NoError(t, err)
	applied, err = sqliteledger.Migrate(ctx, other)
	require.NoError(t, err)
	require.Empty(t, applied, "the script records what it applied")
}

// TestBalanceCheck: the schema refuses a negative balance even when the
// service is bypassed.
func TestBalanceCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t)
	_, err := db.ExecContext(ctx, `INSERT INTO users (id, created_at) VALUES ('u', 0)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO balances (user_id, currency, amount, updated_at) VALUES ('u', 'USD', -1, 0)`)
	require.ErrorContains(t, err, "CHECK constraint failed")
}
