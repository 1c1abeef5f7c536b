package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/store"
)

var _ store.ExpiredDeleter = (*Store)(nil)

// SweepLockWait bounds how long DeleteExpired waits for the database's
// write lock. SQLite has one writer at a time, so the write lock is the
// sweep lock too: a sweep that cannot have it soon steps aside rather than
// queue in front of requests, and reports store.ErrSweepBusy.
const SweepLockWait = 250 * time.Millisecond

// deleteExpired deletes the oldest expired rows through the expires_at
// index, at most :limit, but not a claim whose lock is live nor an
// unfinished record (store.Advancer).
const deleteExpired = `
DELETE FROM idempotency_keys
 WHERE rowid IN (SELECT rowid FROM idempotency_keys
                  WHERE expires_at <= :now
                    AND (status <> 'PROCESSING' OR lease_expires_at <= :now)
                    AND ` + finished + `
                  ORDER BY expires_at
                  LIMIT :limit)
RETURNING scope, idempotency_key`

// DeleteExpired deletes at most limit records past their expiry, but no
// live claim, in one transaction under the database's write lock (see
// store.ExpiredDeleter). When another writer holds that lock for longer than
// SweepLockWait it deletes nothing and returns store.ErrSweepBusy: a record
// an open transaction holds is never waited on for long.
func (s *Store) DeleteExpired(ctx context.Context, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlitestore: delete expired: limit must be positive, got %d", limit)
	}
	t := s.newTx(SweepLockWait)
	defer t.rollback(ctx) // after a commit it does nothing
	c, err := t.begin(ctx)
	if errors.Is(err, store.ErrWaitTimeout) || errors.Is(err, ErrBusy) {
		return nil, errors.Join(store.ErrSweepBusy, err)
	}
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", err)
	}
	deleted, err := deleteBatch(ctx, c, s.sql.deleteExpired, time.Now(), limit)
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", t.explain(err))
	}
	if err := t.commit(ctx); err != nil {
		return nil, fmt.Errorf("delete expired: commit: %w", err)
	}
	return deleted, nil
}

func deleteBatch(ctx context.Context, c *sql.Conn, query string, now time.Time, limit int) ([]store.KeyRef, error) {
	rows, err := c.QueryContext(ctx, query, sql.Named("now", micros(now)), sql.Named("limit", limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var deleted []store.KeyRef
	for rows.Next() {
		var k store.KeyRef
		if err := rows.Scan(&k.Scope, &k.Key); err != nil {
			return nil, err
		}
		deleted = append(deleted, k)
	}
	return deleted, rows.Err()
}
