package pgledger_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/ledgertest"
	"github.com/idem-dev/idem/payments/pgledger"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

// TestConformance runs the suite and then checks every statement it sent
// for what would keep Citus from routing it to the shard of its user.
func TestConformance(t *testing.T) {
	t.Parallel()
	var sent pgtest.Recorder
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		pool := migratedPool(t, 8, &sent)
		return ledgertest.Harness{Ledger: pgledger.New(pool), Store: pgstore.New(pool)}
	})
	t.Cleanup(func() { // after the parallel subtests
		require.NotEmpty(t, sent.Statements())
		requireRoutedByUser(t, sent.Statements())
	})
}

// fanOuts are the wallet's statements that reach every shard of a wallet
// distributed by user, each named in docs/operations.md ("Running on
// Citus"). No statement a request runs is here.
var fanOuts = map[string]bool{
	`SELECT EXISTS (SELECT 1 FROM users)`: true, // paymentsd serve, once at start
}

func requireRoutedByUser(t *testing.T, statements []string) {
	t.Helper()
	for _, s := range statements {
		if problem := pgtest.StatementViolation(s); problem != "" && !fanOuts[s] {
			t.Errorf("%s:\n%s", problem, s)
		}
	}
}

// TestSchemaDistributableByUser: Citus's rules, read in the catalog of the
// migrated key table and wallet.
func TestSchemaDistributableByUser(t *testing.T) {
	t.Parallel()
	require.Empty(t, pgtest.SchemaViolations(t, migratedPool(t, 2, nil)))
}

// migratedPool is a pool of maxConns on a test schema holding the key
// table and the ledger's tables, hash-partitioned by user when
// PG_PARTITIONS asks for it (make test-partitioned), distributed by user
// on Citus when PG_CITUS does (make test-citus); sent, when not nil,
// records the statements the pool runs.
func migratedPool(t *testing.T, maxConns int32, sent *pgtest.Recorder) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	migrator, dsn := pgtest.PoolURL(t, 1)
	n := pgtest.Partitions(t)
	_, err := pgstore.MigrateWithConfig(ctx, migrator, pgstore.MigrateConfig{Partitions: n})
	require.NoError(t, err)
	_, err = pgledger.MigrateWithConfig(ctx, migrator, pgledger.MigrateConfig{Partitions: n})
	require.NoError(t, err)
	if pgtest.Citus() { // make test-citus: distributed as paymentsd migrate --citus does
		_, err = pgledger.Distribute(ctx, migrator)
		require.NoError(t, err)
		_, err = pgstore.Distribute(ctx, migrator, pgstore.DistributeConfig{ColocateWith: "users"})
		require.NoError(t, err)
	}
	migrator.Close()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	if sent != nil {
		cfg.ConnConfig.Tracer = sent
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	applied, err := pgledger.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, applied)
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
	pool := migratedPool(t, 4, nil)
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

// TestPartitioned: with partitions, every wallet table but api_keys is
// hash-partitioned by its user column and keeps its keys and indexes.
func TestPartitioned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	_, err := pgledger.MigrateWithConfig(ctx, pool, pgledger.MigrateConfig{Partitions: 4})
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `
SELECT c.relname || ' ' || pg_get_partkeydef(c.oid) || ' ' ||
       (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid) || ' ' ||
       (SELECT count(*) FROM pg_index WHERE indrelid = c.oid)
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'p'
 ORDER BY c.relname`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{ // table, partition key, partitions, indexes
		"balances HASH (user_id) 4 1",
		"deposits HASH (user_id) 4 2",
		"ledger_entries HASH (user_id) 4 4",
		"payouts HASH (user_id) 4 2",
		"transactions HASH (user_id) 4 2",
		"users HASH (id) 4 1",
	}, got)

	_, err = pgledger.MigrateWithConfig(ctx, pgtest.Pool(t, 2), pgledger.MigrateConfig{Partitions: -1})
	require.ErrorContains(t, err, "partitions must be between 0 and 1024")

}
