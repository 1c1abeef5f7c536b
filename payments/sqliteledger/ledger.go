// Package sqliteledger is the SQLite Ledger of package payments: the
// embedded database paymentsd uses by default. Its tables live beside
// sqlitestore's key table in one database file; open it with
// sqlitestore.Open and create them with Migrate.
package sqliteledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/internal/sqlledger"
	"github.com/idem-dev/idem/sqlitestore"
)

// Ledger keeps the wallet in SQLite. It is a [payments.Ledger].
type Ledger struct {
	base
	db *sql.DB
}

// base is embedded under an unexported name: only its methods, the reads
// and Ping of payments.Ledger, are promoted.
type base = sqlledger.Ledger

var _ payments.Ledger = (*Ledger)(nil)

// New returns a Ledger on db, which should come from sqlitestore.Open.
func New(db *sql.DB) *Ledger {
	return &Ledger{base: sqlledger.New(db, sqlledger.Dialect{
		AmbientFunc: func(ctx context.Context) sqlledger.DBTX { return sqlitestore.DB(ctx, nil) },
		Name:        "sqliteledger",
		CreatedAt:   "created_at",
		SumAmount:   "sum(amount)",
		Savepoint:   "payments_atomic",
		TxOptions:   nil, // BEGIN IMMEDIATE: sqlitestore.Open sets it
	}), db: db}
}

// micros is a time as the tables keep it.
func micros(t time.Time) int64 { return t.UnixMicro() }

// Atomic runs fn in a savepoint of the ambient transaction, or in a BEGIN
// IMMEDIATE transaction of its own. Rolling back to the savepoint undoes
// fn's writes and leaves the ambient transaction usable.
func (l *Ledger) Atomic(ctx context.Context, fn func(payments.LedgerTx) error) error {
	return sqlledger.Unit(ctx, &l.base, func(db sqlledger.DBTX) error { return fn(ledgerTx{db}) })
}

// Ping checks a connection, then asks the database for a row.
func (l *Ledger) Ping(ctx context.Context) error {
	if err := l.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqliteledger: ping: %w", err)
	}
	return l.base.Ping(ctx)
}

type ledgerTx struct{ db sqlledger.DBTX }

// LockBalance needs no row lock: every writer holds the database's write
// lock from its first statement to its end.
func (t ledgerTx) LockBalance(ctx context.Context, userID, currency string) (payments.Funds, error) {
	var f payments.Funds
	if _, err := t.db.ExecContext(ctx, `INSERT INTO balances (user_id, currency, amount, updated_at) VALUES (?, ?, 0, ?)
	                                    ON CONFLICT (user_id, currency) DO NOTHING`, userID, currency, micros(time.Now())); err != nil {
		return f, fmt.Errorf("sqliteledger: create balance: %w", err)
	}
	err := t.db.QueryRowContext(ctx, `SELECT amount, reserved FROM balances WHERE user_id = ? AND currency = ?`, userID, currency).
		Scan(&f.Amount, &f.Reserved)
	if err != nil {
		return f, fmt.Errorf("sqliteledger: read balance: %w", err)
	}
	return f, nil
}

func (t ledgerTx) SetBalance(ctx context.Context, userID, currency string, f payments.Funds) error {
	_, err := t.db.ExecContext(ctx, `UPDATE balances SET amount = ?, reserved = ?, updated_at = ? WHERE user_id = ? AND currency = ?`,
		f.Amount, f.Reserved, micros(time.Now()), userID, currency)
	if err != nil {
		return fmt.Errorf("sqliteledger: set balance: %w", err)
	}
	return nil
}

// A net that fires makes the INSERT do nothing instead of failing.
func (t ledgerTx) InsertDeposit(ctx context.Context, d payments.Deposit, key string) (time.Time, bool, error) {
	now := time.Now()
	return t.insert(ctx, now, `
INSERT INTO deposits (id, user_id, currency, amount, idempotency_key, created_at)
VALUES (?, ?, ?, ?, nullif(?, ''), ?)
ON CONFLICT DO NOTHING`, d.ID, d.UserID, d.Currency, d.Amount, key, micros(now))
}

func (t ledgerTx) InsertTransaction(ctx context.Context, tr payments.Transaction, key string) (time.Time, bool, error) {
	now := time.Now()
	return t.insert(ctx, now, `
INSERT INTO transactions (id, user_id, source_currency, target_currency, amount, converted_amount, rate, status, idempotency_key, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, nullif(?, ''), ?)
ON CONFLICT DO NOTHING`, tr.ID, tr.UserID, tr.SourceCurrency, tr.TargetCurrency, tr.Amount, tr.ConvertedAmount,
		tr.Rate, string(tr.Status), key, micros(now))
}

func (t ledgerTx) insert(ctx context.Context, now time.Time, query string, args ...any) (time.Time, bool, error) {
	res, err := t.db.ExecContext(ctx, query, args...)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqliteledger: insert: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqliteledger: insert: %w", err)
	}
	return sqlledger.FromMicros(micros(now)), n == 1, nil
}

func (t ledgerTx) InsertEntries(ctx context.Context, entries ...payments.Entry) error {
	now := micros(time.Now())
	for _, e := range entries {
		_, err := t.db.ExecContext(ctx, `INSERT INTO ledger_entries (user_id, currency, amount, deposit_id, transaction_id, payout_id, created_at)
		                                 VALUES (?, ?, ?, nullif(?, ''), nullif(?, ''), nullif(?, ''), ?)`,
			e.UserID, e.Currency, e.Amount, e.DepositID, e.TransactionID, e.PayoutID, now)
		if err != nil {
			return fmt.Errorf("sqliteledger: insert entry: %w", err)
		}
	}
	return nil
}

func (t ledgerTx) InsertPayout(ctx context.Context, p payments.Payout, key string) (time.Time, error) {
	now := micros(time.Now())
	_, err := t.db.ExecContext(ctx, `
INSERT INTO payouts (id, user_id, currency, amount, destination, status, bank_key, idempotency_key, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, nullif(?, ''), ?, ?)`,
		p.ID, p.UserID, p.Currency, p.Amount, p.Destination, string(p.Status), p.BankKey, key, now, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("sqliteledger: insert payout: %w", err)
	}
	return sqlledger.FromMicros(now), nil
}

// SetPayoutStatus records a pending payout's outcome, once.
func (t ledgerTx) SetPayoutStatus(ctx context.Context, userID, id string, status payments.PayoutStatus, transferID string) error {
	return t.setPending(ctx, "set payout status", `status = ?, bank_transfer_id = nullif(?, ''), bank_outcome_cause = NULL`,
		userID, id, string(status), transferID)
}

// SetPayoutCause records why a pending payout's bank outcome is unknown.
func (t ledgerTx) SetPayoutCause(ctx context.Context, userID, id, cause string) error {
	return t.setPending(ctx, "set payout cause", `bank_outcome_cause = nullif(?, '')`, userID, id, cause)
}

// setPending sets the columns of set (its placeholders taken by args) on
// the user's pending payout id, and fails when it is not pending.
func (t ledgerTx) setPending(ctx context.Context, what, set, userID, id string, args ...any) error {
	res, err := t.db.ExecContext(ctx, `
UPDATE payouts SET `+set+`, updated_at = ?
 WHERE user_id = ? AND id = ? AND status = 'pending'`, append(args, micros(time.Now()), userID, id)...)
	if err != nil {
		return fmt.Errorf("sqliteledger: %s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("sqliteledger: %s: payout %s is not pending (%v)", what, id, err)
	}
	return nil
}
