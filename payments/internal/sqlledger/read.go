package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/payments"
)

// The methods below are payments.Ledger's reads.

func (l *Ledger) Deposit(ctx context.Context, userID, id string) (payments.Deposit, error) {
	d := payments.Deposit{ID: id, UserID: userID}
	var created int64
	err := l.conn(ctx).QueryRowContext(ctx, `SELECT currency, amount, `+l.d.CreatedAt+` FROM deposits WHERE user_id = ? AND id = ?`,
		userID, id).Scan(&d.Currency, &d.Amount, &created)
	d.CreatedAt = FromMicros(created)
	return d, l.notFound("deposit", err)
}

// Transaction returns the rate as the column holds it.
func (l *Ledger) Transaction(ctx context.Context, userID, id string) (payments.Transaction, error) {
	t := payments.Transaction{ID: id, UserID: userID}
	var created int64
	err := l.conn(ctx).QueryRowContext(ctx, `
SELECT source_currency, target_currency, amount, converted_amount, rate, status, `+l.d.CreatedAt+`
  FROM transactions WHERE user_id = ? AND id = ?`, userID, id).
		Scan(&t.SourceCurrency, &t.TargetCurrency, &t.Amount, &t.ConvertedAmount, &t.Rate, &t.Status, &created)
	t.CreatedAt = FromMicros(created)
	return t, l.notFound("transaction", err)
}

func (l *Ledger) Payout(ctx context.Context, userID, id string) (payments.Payout, error) {
	return l.payout(ctx, `id = ?`, userID, id)
}

func (l *Ledger) PayoutByBankKey(ctx context.Context, userID, bankKey string) (payments.Payout, error) {
	return l.payout(ctx, `bank_key = ?`, userID, bankKey)
}

func (l *Ledger) payout(ctx context.Context, where, userID, arg string) (payments.Payout, error) {
	p := payments.Payout{UserID: userID}
	var created int64
	err := l.conn(ctx).QueryRowContext(ctx, `
SELECT id, currency, amount, destination, status, bank_key, COALESCE(bank_transfer_id, ''), COALESCE(bank_outcome_cause, ''), `+l.d.CreatedAt+`
  FROM payouts WHERE user_id = ? AND `+where, userID, arg).
		Scan(&p.ID, &p.Currency, &p.Amount, &p.Destination, &p.Status, &p.BankKey, &p.BankTransferID, &p.BankOutcomeCause, &created)
	p.CreatedAt = FromMicros(created)
	return p, l.notFound("payout", err)
}

func (l *Ledger) notFound(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return payments.ErrNotFound
	}
	return fmt.Errorf("%s: read %s: %w", l.d.Name, what, err)
}

// Entries reads through the index on (user_id, <movement>_id).
func (l *Ledger) Entries(ctx context.Context, userID string, m payments.Movement, id string) ([]payments.Entry, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%s: read entries: unknown movement %q", l.d.Name, m)
	}
	rows, err := l.conn(ctx).QueryContext(ctx, `
SELECT id, currency, amount, COALESCE(deposit_id, ''), COALESCE(transaction_id, ''), COALESCE(payout_id, ''), `+l.d.CreatedAt+`
  FROM ledger_entries WHERE user_id = ? AND `+string(m)+`_id = ? ORDER BY id`, userID, id)
	if err != nil {
		return nil, fmt.Errorf("%s: read entries: %w", l.d.Name, err)
	}
	defer rows.Close()
	var es []payments.Entry
	for rows.Next() {
		e := payments.Entry{UserID: userID}
		var created int64
		if err := rows.Scan(&e.ID, &e.Currency, &e.Amount, &e.DepositID, &e.TransactionID, &e.PayoutID, &created); err != nil {
			return nil, fmt.Errorf("%s: read entries: %w", l.d.Name, err)
		}
		e.CreatedAt = FromMicros(created)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: read entries: %w", l.d.Name, err)
	}
	return es, nil
}

func (l *Ledger) Balances(ctx context.Context, userID string) ([]payments.Balance, error) {
	return l.balances(ctx, `SELECT currency, amount FROM balances WHERE user_id = ? ORDER BY currency`, userID)
}

func (l *Ledger) EntryTotals(ctx context.Context, userID string) ([]payments.Balance, error) {
	return l.balances(ctx, `SELECT currency, `+l.d.SumAmount+` FROM ledger_entries WHERE user_id = ?
	                        GROUP BY currency ORDER BY currency`, userID)
}

func (l *Ledger) balances(ctx context.Context, query, userID string) ([]payments.Balance, error) {
	rows, err := l.conn(ctx).QueryContext(ctx, query, userID)
	if err != nil {
		return nil, fmt.Errorf("%s: read balances: %w", l.d.Name, err)
	}
	defer rows.Close()
	bs := []payments.Balance{}
	for rows.Next() {
		var b payments.Balance
		if err := rows.Scan(&b.Currency, &b.Amount); err != nil {
			return nil, fmt.Errorf("%s: read balances: %w", l.d.Name, err)
		}
		bs = append(bs, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: read balances: %w", l.d.Name, err)
	}
	return bs, nil
}

func (l *Ledger) UserByKeyHash(ctx context.Context, keyHash []byte) (string, error) {
	var userID string
	err := l.conn(ctx).QueryRowContext(ctx, `SELECT user_id FROM api_keys WHERE key_hash = ?`, keyHash).Scan(&userID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", payments.ErrUnauthorized
	case err != nil:
		return "", fmt.Errorf("%s: look up API key: %w", l.d.Name, err)
	}
	return userID, nil
}

func (l *Ledger) HasUsers(ctx context.Context) (bool, error) {
	var ok bool
	if err := l.conn(ctx).QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&ok); err != nil {
		return false, fmt.Errorf("%s: count users: %w", l.d.Name, err)
	}
	return ok, nil
}

// Ping asks the database for a row, not only for a connection.
func (l *Ledger) Ping(ctx context.Context) error {
	var one int
	if err := l.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("%s: ping: %w", l.d.Name, err)
	}
	return nil
}
