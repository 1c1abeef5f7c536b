package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/store"
)

var _ store.ExpiredDeleter = (*Store)(nil)

// DeleteExpired deletes at most limit records past their expiry, but no
// live claim, in one short transaction (see store.ExpiredDeleter): it
// locks the oldest expired rows, skipping rows another transaction holds
// (FOR UPDATE SKIP LOCKED: PostgreSQL 9.5, MySQL 8.0, MariaDB 10.6), and
// deletes them. Only one sweep per key table runs at a time; others get
// store.ErrSweepBusy.
func (s *Store) DeleteExpired(ctx context.Context, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlstore: delete expired: limit must be positive, got %d", limit)
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", err)
	}
	defer c.Close()
	if !s.dialect.sweepLockInTx {
		if err := s.sweepLock(ctx, c); err != nil {
			return nil, err
		}
		defer func() { _, _ = c.ExecContext(context.WithoutCancel(ctx), s.sql.sweepUnlock) }()
	}
	tx, err := c.BeginTx(ctx, txOptions)
	if err != nil {
		return nil, fmt.Errorf("delete expired: begin: %w", s.translate(err))
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect.sweepLockInTx {
		if err := s.sweepLock(ctx, tx); err != nil {
			return nil, err
		}
	}
	refs, err := s.lockExpired(ctx, tx, limit)
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", s.translate(err))
	}
	if len(refs) > 0 {
		// Key by key, so that the delete locks these rows alone: MySQL
		// scans the whole table for a (scope, idempotency_key) IN list,
		// and would wait on rows other transactions hold.
		var b strings.Builder
		b.WriteString(s.sql.sweepDelete)
		args := make([]any, 0, 2*len(refs))
		for i, r := range refs {
			if i > 0 {
				b.WriteString(" OR ")
			}
			fmt.Fprintf(&b, "(scope = %s AND idempotency_key = %s)", s.dialect.placeholder(2*i+1), s.dialect.placeholder(2*i+2))
			args = append(args, r.Scope, r.Key)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return nil, fmt.Errorf("delete expired: %w", s.translate(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("delete expired: commit: %w", s.translate(err))
	}
	return refs, nil
}

// sweepLock takes the sweep lock without waiting, or says it is busy.
func (s *Store) sweepLock(ctx context.Context, q querier) error {
	var locked bool
	if err := q.QueryRowContext(ctx, s.sql.sweepLock).Scan(&locked); err != nil {
		return fmt.Errorf("delete expired: sweep lock: %w", s.translate(err))
	}
	if !locked {
		return store.ErrSweepBusy
	}
	return nil
}

// lockExpired locks and returns the keys of at most limit expired records.
func (s *Store) lockExpired(ctx context.Context, tx *sql.Tx, limit int) ([]store.KeyRef, error) {
	rows, err := tx.QueryContext(ctx, s.sql.sweepSelect.sql, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var refs []store.KeyRef
	for rows.Next() {
		var r store.KeyRef
		if err := rows.Scan(&r.Scope, &r.Key); err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	return refs, rows.Err()
}
