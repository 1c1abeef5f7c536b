package mysqlledger

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/internal/sqlledger"
	"github.com/idem-dev/idem/payments/money"
)

// Transaction returns the rate in money's canonical form: DECIMAL(38, 18)
// pads it with zeros, and the rate is the one applied.
func (l *Ledger) Transaction(ctx context.Context, userID, id string) (payments.Transaction, error) {
	t, err := l.base.Transaction(ctx, userID, id)
	if err != nil {
		return t, err
	}
	r, err := money.ParseRate(t.Rate)
	if err != nil {
		return t, fmt.Errorf("mysqlledger: read transaction: %w", err)
	}
	t.Rate = r.String()
	return t, nil
}

func (l *Ledger) CreateUser(ctx context.Context, userID string, keyHash []byte) error {
	return sqlledger.Unit(ctx, &l.base, func(db sqlledger.DBTX) error {
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
