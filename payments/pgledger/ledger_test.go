package pgledger_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/ledgertest"
	"github.com/idem-dev/idem/payments/pgledger"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		pool := migratedPool(t, 8)
		return ledgertest.Harness{Ledger: pgledger.New(pool), Store: pgstore.New(pool)}
	})
}

// migratedPool is a pool of maxConns on a test schema holding the key
// table and the ledger's tables.
func migratedPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Pool(t, maxConns)
	ctx := context.Background()
	_, err := pgstore.Migrate(ctx, pool)
	require.NoError(t, err)
	_, err = pgledger.Migrate(ctx, pool)
	require.NoError(t, err)
	return pool
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	applied, err := pgledger.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3, 4, 6}, applied)
	applied, err = pgledger.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, applied, "a current schema is left alone")
	var keyIndexes int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes
	    WHERE schemaname = current_schema() AND tablename IN ('deposits', 'transactions') AND indexdef LIKE '%idempotency_key%'`).Scan(&keyIndexes))
	require.Zero(t, keyIndexes, "no index binds a key: it is plain data")

	script, err := pgledger.MigrationSQL()
	require.NoError(t, err)
	require.Contains(t, script, "CREATE UNIQUE INDEX transactions_minute_net")
	require.Contains(t, script, "CREATE UNIQUE INDEX deposits_minute_net")
	other := pgtest.Pool(t, 4)
	_, err = other.Exec(ctx, script)
	require.NoError(t, err)
	applied, err = pgledger.Migrate(ctx, other)
	require.NoError(t, err)
	require.Empty(t, applied, "the script records what it applied")
}

// TestBalanceCheck: the schema refuses a negative balance even when the
// service is bypassed.
func TestBalanceCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	_, err := pgledger.Migrate(ctx, pool)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO users (id) VALUES ('00000000-0000-0000-0000-000000000001')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO balances (user_id, currency, amount) VALUES ('00000000-0000-0000-0000-000000000001', 'USD', -1)`)
	require.ErrorContains(t, err, "balances_amount_check")
}

// TestBeginFailsAlone: a unit whose SAVEPOINT fails (the request's
// transaction is already aborted) reports that failure alone, with no
// rollback error of a savepoint that never existed piled on top.
func TestBeginFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedPool(t, 4)
	tx, err := pgstore.New(pool).Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	ctx = tx.Context(ctx)
	_, err = pgstore.DB(ctx, pool).Exec(ctx, "SELECT 1/0")
	require.ErrorContains(t, err, "division by zero")

	ran := false
	err = pgledger.New(pool).Atomic(ctx, func(lt payments.LedgerTx) error {
		ran = true
		_, err := lt.LockBalance(ctx, "00000000-0000-0000-0000-000000000001", "USD")
		return err
	})
	require.True(t, ran)
	require.ErrorContains(t, err, "pgledger: begin")
	require.ErrorContains(t, err, "25P02", "the transaction is aborted")
	require.NotContains(t, err.Error(), "rollback")
}
