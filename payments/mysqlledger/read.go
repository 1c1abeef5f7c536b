package mysqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/money"
	"github.com/idem-dev/idem/sqlstore"
)

func (l *Ledger) Deposit(ctx context.Context, userID, id string) (payments.Deposit, error) {
	d := payments.Deposit{ID: id, UserID: userID}
	var created int64
	err := l.conn(ctx).QueryRowContext(ctx, `SELECT currency, amount, `+micros("created_at")+` FROM deposits WHERE user_id = ? AND id = ?`,
		userID, id).Scan(&d.Currency, &d.Amount, &created)
	d.CreatedAt = fromMicros(created)
	return d, notFound("deposit", err)
}

func (l *Ledger) Transaction(ctx context.Context, userID, id string) (payments.Transaction, error) {
	t := payments.Transaction{ID: id, UserID: userID}
	var (
		created int64
		rate    string
	)
	err := l.conn(ctx).QueryRowContext(ctx, `
SELECT source_currency, target_currency, amount, converted_amount, rate, status, `+micros("created_at")+`
  FROM transactions WHERE user_id = ? AND id = ?`, userID, id).
		Scan(&t.SourceCurrency, &t.TargetCurrency, &t.Amount, &t.ConvertedAmount, &rate, &t.Status, &created)
	if err != nil {
		return t, notFound("transaction", err)
	}
	t.CreatedAt = fromMicros(created)
	// DECIMAL(38, 18) pads the rate with zeros; money's canonical form is
	// the rate as it was applied.
	r, err := money.ParseRate(rate)
	if err != nil {
		return t, fmt.Errorf("mysqlledger: read transaction: %w", err)
	}
	t.Rate = r.String()
	return t, nil
}

var selectPayout = `
SELECT id, currency, amount, destination, status, bank_key, COALESCE(bank_transfer_id, ''), ` + micros("created_at") + `
  FROM payouts`

func (l *Ledger) Payout(ctx context.Context, userID, id string) (payments.Payout, error) {
	return l.payout(ctx, selectPayout+` WHERE user_id = ? AND id = ?`, userID, id)
}

func (l *Ledger) PayoutByBankKey(ctx context.Context, userID, bankKey string) (payments.Payout, error) {
	return l.payout(ctx, selectPayout+` WHERE user_id = ? AND bank_key = ?`, userID, bankKey)
}

func (l *Ledger) payout(ctx context.Context, query, userID, arg string) (payments.Payout, error) {
	p := payments.Payout{UserID: userID}
	var created int64
	err := l.conn(ctx).QueryRowContext(ctx, query, userID, arg).
		Scan(&p.ID, &p.Currency, &p.Amount, &p.Destination, &p.Status, &p.BankKey, &p.BankTransferID, &created)
	p.CreatedAt = fromMicros(created)
	return p, notFound("payout", err)
}

func notFound(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return payments.ErrNotFound
	}
	return fmt.Errorf("mysqlledger: read %s: %w", what, err)
}

func (l *Ledger) Balances(ctx context.Context, userID string) ([]payments.Balance, error) {
	return l.balances(ctx, `SELECT currency, amount FROM balances WHERE user_id = ? ORDER BY currency`, userID)
}

// EntryTotals casts the sums back to integers: SUM of a BIGINT is a
// DECIMAL in MySQL.
func (l *Ledger) EntryTotals(ctx context.Context, userID string) ([]payments.Balance, error) {
	return l.balances(ctx, `SELECT currency, CAST(SUM(amount) AS SIGNED) FROM ledger_entries WHERE user_id = ?
	                        GROUP BY currency ORDER BY currency`, userID)
}

func (l *Ledger) balances(ctx context.Context, query, userID string) ([]payments.Balance, error) {
	rows, err := l.conn(ctx).QueryContext(ctx, query, userID)
	if err != nil {
		return nil, fmt.Errorf("mysqlledger: read balances: %w", err)
	}
	defer rows.Close()
	bs := []payments.Balance{}
	for rows.Next() {
		var b payments.Balance
		if err := rows.Scan(&b.Currency, &b.Amount); err != nil {
			return nil, fmt.Errorf("mysqlledger: read balances: %w", err)
		}
		bs = append(bs, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlledger: read balances: %w", err)
	}
	return bs, nil
}

func (l *Ledger) CreateUser(ctx context.Context, userID string, keyHash []byte) error {
	return l.atomic(ctx, func(db sqlstore.DBTX) error {
		if _, err := db.ExecContext(ctx, `INSERT INTO users (id, created_at) VALUES (?, UTC_TIMESTAMP(6))`, userID); err != nil {
			return fmt.Errorf("mysqlledger: create user: %w", err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO api_keys (key_hash, user_id, created_at) VALUES (?, ?, UTC_TIMESTAMP(6))`,
			keyHash, userID); err != nil {
			return fmt.Errorf("mysqlledger: create user: %w", err)
		}
		return nil
	})
}

func (l *Ledger) UserByKeyHash(ctx context.Context, keyHash []byte) (string, error) {
	var userID string
	err := l.conn(ctx).QueryRowContext(ctx, `SELECT user_id FROM api_keys WHERE key_hash = ?`, keyHash).Scan(&userID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", payments.ErrUnauthorized
	case err != nil:
		return "", fmt.Errorf("mysqlledger: look up API key: %w", err)
	}
	return userID, nil
}

func (l *Ledger) HasUsers(ctx context.Context) (bool, error) {
	var ok bool
	if err := l.conn(ctx).QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&ok); err != nil {
		return false, fmt.Errorf("mysqlledger: count users: %w", err)
	}
	return ok, nil
}

func (l *Ledger) Ping(ctx context.Context) error {
	var one int
	if err := l.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("mysqlledger: ping: %w", err)
	}
	return nil
}
