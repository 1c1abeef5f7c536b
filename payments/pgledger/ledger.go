// Package pgledger is the PostgreSQL Ledger of package payments. Its tables
// live beside pgstore's key table, in the schema the pool's search_path
// names; create them with Migrate.
package pgledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
//
// The unit of work is pipelined (see unit): a conversion costs two round
// trips of its own, not eight, and inside a request's transaction one: its
// last writes travel with the completion of the key.
func (l *Ledger) Atomic(ctx context.Context, fn func(payments.LedgerTx) error) error {
	u, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer u.close(context.WithoutCancel(ctx))
	if err := fn(ledgerTx{u}); err != nil {
		return errors.Join(err, u.rollback(context.WithoutCancel(ctx)))
	}
	return u.commit(ctx)
}

type ledgerTx struct{ u *unit }

// LockBalance returns a balance that the movement's insert has already
// locked; else it reads and locks it in one statement, and only a balance
// that does not exist yet costs a second round trip, to create it.
func (t ledgerTx) LockBalance(ctx context.Context, userID, currency string) (payments.Funds, error) {
	if f, ok := t.u.locked[balanceKey{userID, currency}]; ok {
		return f, nil
	}
	const lock = `SELECT amount, reserved FROM balances WHERE user_id = $1 AND currency = $2 FOR UPDATE`
	var f payments.Funds
	err := t.u.queryRow(ctx, lock, userID, currency).Scan(&f.Amount, &f.Reserved)
	if !errors.Is(err, pgx.ErrNoRows) {
		if err != nil {
			return f, fmt.Errorf("pgledger: lock balance: %w", err)
		}
		return f, nil
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO balances (user_id, currency, amount) VALUES ($1, $2, 0)
	         ON CONFLICT (user_id, currency) DO NOTHING`, userID, currency)
	b.Queue(lock, userID, currency)
	br, err := t.u.send(ctx, b)
	if err != nil {
		return f, fmt.Errorf("pgledger: lock balance: %w", err)
	}
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return f, fmt.Errorf("pgledger: create balance: %w", err)
	}
	if err := br.QueryRow().Scan(&f.Amount, &f.Reserved); err != nil {
		return f, fmt.Errorf("pgledger: lock balance: %w", err)
	}
	if err := br.Close(); err != nil {
		return f, fmt.Errorf("pgledger: lock balance: %w", err)
	}
	t.u.locked[balanceKey{userID, currency}] = f
	return f, nil
}

// SetBalance is sent with the unit's next statement, or with its commit:
// nothing reads its result before then.
func (t ledgerTx) SetBalance(ctx context.Context, userID, currency string, f payments.Funds) error {
	t.u.locked[balanceKey{userID, currency}] = f
	t.u.queue("pgledger: set balance", `UPDATE balances SET amount = $3, reserved = $4, updated_at = now() WHERE user_id = $1 AND currency = $2`,
		userID, currency, f.Amount, f.Reserved)
	return nil
}

// A net that fires makes the INSERT do nothing instead of failing, so the
// transaction is not aborted.
func (t ledgerTx) InsertDeposit(ctx context.Context, d payments.Deposit, key string) (time.Time, bool, error) {
	return t.insert(ctx, d.UserID, []string{d.Currency}, `
INSERT INTO deposits (id, user_id, currency, amount, idempotency_key)
VALUES ($1, $2, $3, $4, nullif($5, ''))
ON CONFLICT DO NOTHING
RETURNING created_at`, d.ID, d.UserID, d.Currency, d.Amount, key)
}

func (t ledgerTx) InsertTransaction(ctx context.Context, tr payments.Transaction, key string) (time.Time, bool, error) {
	return t.insert(ctx, tr.UserID, []string{tr.SourceCurrency, tr.TargetCurrency}, `
INSERT INTO transactions (id, user_id, source_currency, target_currency, amount, converted_amount, rate, status, idempotency_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''))
ON CONFLICT DO NOTHING
RETURNING created_at`, tr.ID, tr.UserID, tr.SourceCurrency, tr.TargetCurrency, tr.Amount, tr.ConvertedAmount,
		tr.Rate, string(tr.Status), key)
}

// createBalances creates the user's missing balances in currencies at
// zero, and lockBalances locks them all, both in the order Service.lockOrder
// locks them in (by code; COLLATE "C" makes it byte order whatever the
// database's collation), as LockBalance would one by one.
const (
	createBalances = `INSERT INTO balances (user_id, currency, amount)
SELECT $1::text, c, 0 FROM unnest($2::text[]) WITH ORDINALITY AS u (c, i) ORDER BY i
    ON CONFLICT (user_id, currency) DO NOTHING`
	lockBalances = `SELECT currency, amount, reserved FROM balances WHERE user_id = $1 AND currency = ANY($2)
 ORDER BY currency COLLATE "C" FOR UPDATE`
)

// insert stores a movement's row and, in the same round trip, creates and
// locks the balances the movement is about to lock, so that LockBalance
// finds them locked and costs nothing: the locks are taken at the same
// point of the unit and in the same order as LockBalance would take them,
// only without two round trips each. When a net fires, the unit is rolled
// back and the locks go with it.
func (t ledgerTx) insert(ctx context.Context, userID string, currencies []string, sql string, args ...any) (time.Time, bool, error) {
	currencies = slices.Clone(currencies)
	slices.Sort(currencies)
	currencies = slices.Compact(currencies)
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(createBalances, userID, currencies)
	b.Queue(lockBalances, userID, currencies)
	br, err := t.u.send(ctx, b)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("pgledger: insert: %w", err)
	}
	defer br.Close()
	var created time.Time
	inserted := true
	switch err := br.QueryRow().Scan(&created); {
	case errors.Is(err, pgx.ErrNoRows):
		inserted = false
	case err != nil:
		return time.Time{}, false, fmt.Errorf("pgledger: insert: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return time.Time{}, false, fmt.Errorf("pgledger: create balances: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("pgledger: lock balances: %w", err)
	}
	for rows.Next() {
		var c string
		var f payments.Funds
		if err := rows.Scan(&c, &f.Amount, &f.Reserved); err != nil {
			rows.Close()
			return time.Time{}, false, fmt.Errorf("pgledger: lock balances: %w", err)
		}
		t.u.locked[balanceKey{userID, c}] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, false, fmt.Errorf("pgledger: lock balances: %w", err)
	}
	if err := br.Close(); err != nil {
		return time.Time{}, false, fmt.Errorf("pgledger: insert: %w", err)
	}
	return created, inserted, nil
}

// InsertEntries is sent with the unit's next statement, or with its commit.
func (t ledgerTx) InsertEntries(ctx context.Context, entries ...payments.Entry) error {
	for _, e := range entries {
		t.u.queue("pgledger: insert entries", `INSERT INTO ledger_entries (user_id, currency, amount, deposit_id, transaction_id, payout_id)
		         VALUES ($1, $2, $3, nullif($4, '')::uuid, nullif($5, '')::uuid, nullif($6, '')::uuid)`,
			e.UserID, e.Currency, e.Amount, e.DepositID, e.TransactionID, e.PayoutID)
	}
	return nil
}

// InsertPayout stores a pending payout. The balance is locked first
// (LockBalance), so this costs one round trip.
func (t ledgerTx) InsertPayout(ctx context.Context, p payments.Payout, key string) (time.Time, error) {
	var created time.Time
	err := t.u.queryRow(ctx, `
INSERT INTO payouts (id, user_id, currency, amount, destination, status, bank_key, idempotency_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''))
RETURNING created_at`, p.ID, p.UserID, p.Currency, p.Amount, p.Destination, string(p.Status), p.BankKey, key).Scan(&created)
	if err != nil {
		return time.Time{}, fmt.Errorf("pgledger: insert payout: %w", err)
	}
	return created, nil
}

// SetPayoutStatus records a pending payout's outcome, once.
func (t ledgerTx) SetPayoutStatus(ctx context.Context, userID, id string, status payments.PayoutStatus, transferID string) error {
	return t.setPending(ctx, "set payout status", `status = $3, bank_transfer_id = nullif($4, ''), bank_outcome_cause = NULL`,
		userID, id, string(status), transferID)
}

// SetPayoutCause records why a pending payout's bank outcome is unknown.
func (t ledgerTx) SetPayoutCause(ctx context.Context, userID, id, cause string) error {
	return t.setPending(ctx, "set payout cause", `bank_outcome_cause = nullif($3, '')`, userID, id, cause)
}

// setPending sets the columns of set ($3 on) on the user's pending payout
// id, and fails when it is not pending.
func (t ledgerTx) setPending(ctx context.Context, what, set, userID, id string, args ...any) error {
	var n int
	err := t.u.queryRow(ctx, `
WITH set AS (
UPDATE payouts SET `+set+`, updated_at = now()
 WHERE user_id = $1 AND id = $2 AND status = 'pending'
RETURNING 1)
SELECT count(*) FROM set`, append([]any{userID, id}, args...)...).Scan(&n)
	if err != nil {
		return fmt.Errorf("pgledger: %s: %w", what, err)
	}
	if n != 1 {
		return fmt.Errorf("pgledger: %s: payout %s is not pending", what, id)
	}
	return nil
}
