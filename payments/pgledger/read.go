package pgledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/payments"
)

func (l *Ledger) Deposit(ctx context.Context, userID, id string) (payments.Deposit, error) {
	d := payments.Deposit{ID: id, UserID: userID}
	err := l.db(ctx).QueryRow(ctx, `SELECT currency, amount, created_at FROM deposits WHERE user_id = $1 AND id = $2`,
		userID, id).Scan(&d.Currency, &d.Amount, &d.CreatedAt)
	return d, notFound("deposit", err)
}

func (l *Ledger) Transaction(ctx context.Context, userID, id string) (payments.Transaction, error) {
	t := payments.Transaction{ID: id, UserID: userID}
	err := l.db(ctx).QueryRow(ctx, `
SELECT source_currency, target_currency, amount, converted_amount, rate::text, status, created_at
  FROM transactions WHERE user_id = $1 AND id = $2`, userID, id).
		Scan(&t.SourceCurrency, &t.TargetCurrency, &t.Amount, &t.ConvertedAmount, &t.Rate, &t.Status, &t.CreatedAt)
	return t, notFound("transaction", err)
}

const selectPayout = `
SELECT id, currency, amount, destination, status, bank_key, coalesce(bank_transfer_id, ''), coalesce(bank_outcome_cause, ''), created_at
  FROM payouts`

func (l *Ledger) Payout(ctx context.Context, userID, id string) (payments.Payout, error) {
	return l.payout(ctx, selectPayout+` WHERE user_id = $1 AND id = $2`, userID, id)
}

func (l *Ledger) PayoutByBankKey(ctx context.Context, userID, bankKey string) (payments.Payout, error) {
	return l.payout(ctx, selectPayout+` WHERE user_id = $1 AND bank_key = $2`, userID, bankKey)
}

func (l *Ledger) payout(ctx context.Context, sql, userID, arg string) (payments.Payout, error) {
	p := payments.Payout{UserID: userID}
	err := l.db(ctx).QueryRow(ctx, sql, userID, arg).
		Scan(&p.ID, &p.Currency, &p.Amount, &p.Destination, &p.Status, &p.BankKey, &p.BankTransferID, &p.BankOutcomeCause, &p.CreatedAt)
	return p, notFound("payout", err)
}

func notFound(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return payments.ErrNotFound
	}
	return fmt.Errorf("pgledger: read %s: %w", what, err)
}

// Entries reads through the partial index on (user_id, <movement>_id).
func (l *Ledger) Entries(ctx context.Context, userID string, m payments.Movement, id string) ([]payments.Entry, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("pgledger: read entries: unknown movement %q", m)
	}
	rows, err := l.db(ctx).Query(ctx, `
SELECT id, currency, amount, coalesce(deposit_id::text, ''), coalesce(transaction_id::text, ''), coalesce(payout_id::text, ''), created_at
  FROM ledger_entries WHERE user_id = $1 AND `+string(m)+`_id = $2 ORDER BY id`, userID, id)
	if err != nil {
		return nil, fmt.Errorf("pgledger: read entries: %w", err)
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (payments.Entry, error) {
		e := payments.Entry{UserID: userID}
		return e, r.Scan(&e.ID, &e.Currency, &e.Amount, &e.DepositID, &e.TransactionID, &e.PayoutID, &e.CreatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("pgledger: read entries: %w", err)
	}
	return es, nil
}

func (l *Ledger) Balances(ctx context.Context, userID string) ([]payments.Balance, error) {
	return l.balances(ctx, `SELECT currency, amount FROM balances WHERE user_id = $1 ORDER BY currency`, userID)
}

func (l *Ledger) EntryTotals(ctx context.Context, userID string) ([]payments.Balance, error) {
	return l.balances(ctx, `SELECT currency, sum(amount)::bigint FROM ledger_entries WHERE user_id = $1
	                        GROUP BY currency ORDER BY currency`, userID)
}

func (l *Ledger) balances(ctx context.Context, sql, userID string) ([]payments.Balance, error) {
	rows, err := l.db(ctx).Query(ctx, sql, userID)
	if err != nil {
		return nil, fmt.Errorf("pgledger: read balances: %w", err)
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (payments.Balance, error) {
		var b payments.Balance
		return b, r.Scan(&b.Currency, &b.Amount)
	})
	if err != nil {
		return nil, fmt.Errorf("pgledger: read balances: %w", err)
	}
	return bs, nil
}

func (l *Ledger) CreateUser(ctx context.Context, userID string, keyHash []byte) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO users (id) VALUES ($1)`, userID)
	b.Queue(`INSERT INTO api_keys (key_hash, user_id) VALUES ($1, $2)`, keyHash, userID)
	return l.inTx(ctx, func(tx pgx.Tx) error {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("pgledger: create user: %w", err)
		}
		return nil
	})
}

func (l *Ledger) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := l.db(ctx).Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgledger: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (l *Ledger) UserByKeyHash(ctx context.Context, keyHash []byte) (string, error) {
	var userID string
	err := l.db(ctx).QueryRow(ctx, `SELECT user_id::text FROM api_keys WHERE key_hash = $1`, keyHash).Scan(&userID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", payments.ErrUnauthorized
	case err != nil:
		return "", fmt.Errorf("pgledger: look up API key: %w", err)
	}
	return userID, nil
}

func (l *Ledger) HasUsers(ctx context.Context) (bool, error) {
	var ok bool
	if err := l.db(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&ok); err != nil {
		return false, fmt.Errorf("pgledger: count users: %w", err)
	}
	return ok, nil
}

func (l *Ledger) Ping(ctx context.Context) error {
	if _, err := l.db(ctx).Exec(ctx, `SELECT 1`); err != nil {
		return fmt.Errorf("pgledger: ping: %w", err)
	}
	return nil
}
