package mysqlledger_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/mysqlstore/mysqltest"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/ledgertest"
	"github.com/idem-dev/idem/payments/mysqlledger"
)

// open returns a pool on a database of the test's own, with the key table
// and the wallet's tables when migrated. Its connections are few, so that
// tests in parallel stay within the server's max_connections.
func open(t *testing.T, migrated bool) *sql.DB {
	t.Helper()
	db, err := mysqlstore.Open(mysqltest.NewDatabase(t))
	require.NoError(t, err)
	db.SetMaxOpenConns(12)
	t.Cleanup(func() { _ = db.Close() })
	if migrated {
		ctx := context.Background()
		_, err = mysqlstore.Migrate(ctx, db, mysqlstore.Config{})
		require.NoError(t, err)
		_, err = mysqlledger.Migrate(ctx, db)
		require.NoError(t, err)
	}
	return db
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T) ledgertest.Harness {
		db := open(t, true)
		s, err := mysqlstore.New(db, mysqlstore.Config{})
		require.NoError(t, err)
		return ledgertest.Harness{Ledger: mysqlledger.New(db), Store: s}
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t, false)
	applied, err := mysqlledger.Migrate(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []int{1, 6, 7}, applied)
	applied, err = mysqlledger.Migrate(ctx, db)
	require.NoError(t, err)
	require.Empty(t, applied, "a current schema is left alone")
	var keyIndexes int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.statistics
	    WHERE table_schema = DATABASE() AND table_name IN ('deposits', 'transactions') AND column_name = 'idempotency_key'`).Scan(&keyIndexes))
	require.Zero(t, keyIndexes, "no index binds a key: it is plain data")

	script, err := mysqlledger.MigrationSQL()
	require.NoError(t, err)
	require.Contains(t, script, "UNIQUE KEY transactions_minute_net")
	require.Contains(t, script, "UNIQUE KEY deposits_minute_net")
	other := open(t, false)
	c, err := other.Conn(ctx)
	require.NoError(t, err)
	defer c.Close()
	// One statement at a time: the driver runs one per call.
	for _, stmt := range strings.Split(script, ";\n") {
		if strings.TrimSpace(stmt) != "" {
			_, err := c.ExecContext(ctx, stmt)
			require.NoError(t, err, "%s", stmt)
		}
	}
	applied, err = mysqlledger.Migrate(ctx, other)
	require.NoError(t, err)
	require.Empty(t, applied, "the script records what it applied")
}

// TestChecks: the schema refuses a negative balance and a lower-case
// currency even when the service is bypassed.
func TestChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t, true)
	const user = "00000000-0000-0000-0000-000000000001"
	_, err := db.ExecContext(ctx, `INSERT INTO users (id, created_at) VALUES (?, UTC_TIMESTAMP(6))`, user)
	require.NoError(t, err)
	insert := `INSERT INTO balances (user_id, currency, amount, updated_at) VALUES (?, ?, ?, UTC_TIMESTAMP(6))`
	_, err = db.ExecContext(ctx, insert, user, "USD", -1)
	require.ErrorContains(t, err, "balances_amount_check")
	_, err = db.ExecContext(ctx, insert, user, "usd", 1)
	require.ErrorContains(t, err, "balances_currency_check")
	_, err = db.ExecContext(ctx, insert, user, "USD", 1)
	require.NoError(t, err)
}

// TestConcurrentFirstBalances: one user's first deposits in every currency
// at once each create and lock a balance that does not exist yet, and all
// succeed. (Before units took their user's lock, they deadlocked on the
// gap at InnoDB's default REPEATABLE READ, though not at READ COMMITTED.)
func TestConcurrentFirstBalances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := payments.New(mysqlledger.New(open(t, true)), payments.Config{})
	require.NoError(t, err)
	user, _, err := s.CreateUser(ctx)
	require.NoError(t, err)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards errs
		errs []error
	)
	codes := s.Rates().Codes()
	for _, c := range codes {
		wg.Go(func() {
			_, err := s.Deposit(ctx, user, "", payments.DepositRequest{Currency: c, Amount: 100})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs, "%v", errs)
	bs, err := s.Balances(ctx, user)
	require.NoError(t, err)
	require.Len(t, bs, len(codes))
	require.NoError(t, s.Reconcile(ctx, user))
}

// TestCreatingABalanceRolledBack: conversions from a currency the user
// never held create its balance at zero and roll it back (insufficient
// funds), while deposits into that currency create it too. InnoDB checks
// duplicates with gap locks even at READ COMMITTED: without the user's
// lock, two creators waiting on a row that a rollback removes deadlock.
func TestCreatingABalanceRolledBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := payments.New(mysqlledger.New(open(t, true)), payments.Config{})
	require.NoError(t, err)
	user, _, err := s.CreateUser(ctx)
	require.NoError(t, err)
	const n = 12
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards errs
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = s.Convert(ctx, user, "", payments.TransferRequest{SourceCurrency: "GBP", TargetCurrency: "USD", Amount: int64(100 + i)})
				var ife *payments.InsufficientFundsError
				if errors.As(err, &ife) {
					err = nil
				}
			} else {
				_, err = s.Deposit(ctx, user, "", payments.DepositRequest{Currency: "GBP", Amount: int64(100 + i)})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs, "%v", errs)
	require.NoError(t, s.Reconcile(ctx, user))
}
