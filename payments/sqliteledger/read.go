package sqliteledger

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-dev/idem/payments/internal/sqlledger"
)

func (l *Ledger) CreateUser(ctx context.Context, userID string, keyHash []byte) error {
	return sqlledger.Unit(ctx, &l.base, func(db sqlledger.DBTX) error {
		now := micros(time.Now())
		if _, err := db.ExecContext(ctx, `INSERT INTO users (id, created_at) VALUES (?, ?)`, userID, now); err != nil {
			return fmt.Errorf("sqliteledger: create user: %w", err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO api_keys (key_hash, user_id, created_at) VALUES (?, ?, ?)`, keyHash, userID, now); err != nil {
			return fmt.Errorf("sqliteledger: create user: %w", err)
		}
		return nil
	})
}
