// Package pgledger is the PostgreSQL Ledger of package payments. Its tables
// live beside pgstore's key table, in the schema the pool's search_path
// names; create them with Migrate.
package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/pgstore"
)

// Ledger keeps the wallet in PostgreSQL.
type Ledger struct {
	pool *pgxpool.Pool
}

var _ payments.Ledger = (*Ledger)(nil)

// New returns a Ledger on pool.
func New(pool *pgxpool.Pool) *Ledger { return &Ledger{pool: pool} }

// db is the request's ambient transaction, or the pool.
func (l *Ledger) db(ctx context.Context) pgstore.DBTX { return pgstore.DB(ctx, l.pool) }

// Atomic runs fn in a savepoint of the ambient transaction, or in a
// transaction of its own. Rolling back to the savepoint undoes fn's writes
// and leaves the ambient transaction usable, so a business error still ends
// as a stored response.
func (l *Ledger) Atomic(ctx context.Context, fn func(payments.LedgerTx) error) error {
	tx, err := l.db(ctx).Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgledger: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit, a no-op
	if err := fn(ledgerTx{tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgledger: commit: %w", err)
	}
	return nil
}

type ledgerTx struct{ tx pgx.Tx }

func (t ledgerTx) LockBalance(ctx context.Context, userID, currency string) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO balances (user_id, currency, amount) VALUES ($1, $2, 0)
	         ON CONFLICT (user_id, currency) DO NOTHING`, userID, currency)
	b.Queue(`SELECT amount FROM balances WHERE user_id = $1 AND currency = $2 FOR UPDATE`, userID, currency)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, fmt.Errorf("pgledger: create balance: %w", err)
	}
	var amount int64
	if err := br.QueryRow().Scan(&amount); err != nil {
		return 0, fmt.Errorf("pgledger: lock balance: %w", err)
	}
	return amount, br.Close()
}

func (t ledgerTx) SetBalance(ctx context.Context, userID, currency string, amount int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE balances SET amount = $3, updated_at = now() WHERE user_id = $1 AND currency = $2`,
		userID, currency, amount)
	if err != nil {
		return fmt.Errorf("pgledger: set balance: %w", err)
	}
	return nil
}

// A net that fires makes the INSERT do nothing instead of failing, so the
// transaction is not aborted.
func (t ledgerTx) InsertDeposit(ctx context.Context, d payments.Deposit, key string) (time.Time, bool, error) {
	return t.insert(ctx, `
INSERT INTO deposits (id, user_id, currency, amount, idempotency_key)
VALUES ($1, $2, $3, $4, nullif($5, ''))
ON CONFLICT DO NOTHING
RETURNING created_at`, d.ID, d.UserID, d.Currency, d.Amount, key)
}

func (t ledgerTx) InsertTransaction(ctx context.Context, tr payments.Transaction, key string) (time.Time, bool, error) {
	return t.insert(ctx, `
INSERT INTO transactions (id, user_id, source_currency, target_currency, amount, converted_amount, rate, status, idempotency_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''))
ON CONFLICT DO NOTHING
RETURNING created_at`, tr.ID, tr.UserID, tr.SourceCurrency, tr.TargetCurrency, tr.Amount, tr.ConvertedAmount,
		tr.Rate, string(tr.Status), key)
}

func (t ledgerTx) insert(ctx context.Context, sql string, args ...any) (time.Time, bool, error) {
	var created time.Time
	err := t.tx.QueryRow(ctx, sql, args...).Scan(&created)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("pgledger: insert: %w", err)
	}
	return created, true, nil
}

var keyBound = map[payments.Kind]string{
	payments.KindDeposit:     `SELECT EXISTS (SELECT 1 FROM deposits WHERE user_id = $1 AND idempotency_key = $2)`,
	payments.KindTransaction: `SELECT EXISTS (SELECT 1 FROM transactions WHERE user_id = $1 AND idempotency_key = $2)`,
}

func (t ledgerTx) KeyBound(ctx context.Context, kind payments.Kind, userID, key string) (bool, error) {
	var bound bool
	if err := t.tx.QueryRow(ctx, keyBound[kind], userID, key).Scan(&bound); err != nil {
		return false, fmt.Errorf("pgledger: key bound: %w", err)
	}
	return bound, nil
}

func (t ledgerTx) InsertEntries(ctx context.Context, entries ...payments.Entry) error {
	b := &pgx.Batch{}
	for _, e := range entries {
		b.Queue(`INSERT INTO ledger_entries (user_id, currency, amount, deposit_id, transaction_id)
		         VALUES ($1, $2, $3, nullif($4, '')::uuid, nullif($5, '')::uuid)`,
			e.UserID, e.Currency, e.Amount, e.DepositID, e.TransactionID)
	}
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgledger: insert entries: %w", err)
	}
	return nil
}
