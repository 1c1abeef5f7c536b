package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

var _ store.ExpiredDeleter = (*Store)(nil)

// sweepLock takes the sweep lock of this schema's key table for the
// transaction, without waiting: a transaction-scoped advisory lock, which
// works through a pooler in transaction mode, unlike a session lock. The
// table's oid tells schemas apart. The same statement bounds the wait for
// the table lock: a sweep queued behind a migration gives up rather than
// hold up the requests queued behind it.
const sweepLock = `
SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text)),
       set_config('lock_timeout', '2s', true)`

// deleteExpired deletes the oldest expired rows through the expires_at
// index, at most $1, but not a claim whose lock is live nor an unfinished
// row (store.Advancer: model/payout.pml's sweeper skips UNKNOWN), and skips rows
// another transaction holds (a request re-acquiring an expired key) instead
// of waiting for them; a row whose lock was renewed meanwhile is checked
// again when locked, and left. The rows it
// locked are then deleted by their physical address (a TID scan); adding
// any other condition to the outer WHERE lets the planner scan the whole
// expired range of the index a second time, in every batch.
const deleteExpired = `
DELETE FROM idempotency_keys
 WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM idempotency_keys
          WHERE expires_at <= now()
            AND (status <> 'PROCESSING' OR lock_expires_at <= now())
            AND ` + finished + `
          ORDER BY expires_at
          LIMIT $1
            FOR UPDATE SKIP LOCKED))
RETURNING user_id, idempotency_key`

// DeleteExpired deletes at most limit records past their expiry, but no
// live claim, in one short transaction (see store.ExpiredDeleter). Only one
// transaction per key table sweeps at a time; others get store.ErrSweepBusy.
func (s *Store) DeleteExpired(ctx context.Context, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pgstore: delete expired: limit must be positive, got %d", limit)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("delete expired: begin: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var (
		locked bool
		prev   string
	)
	if err := tx.QueryRow(ctx, s.sql.sweepLock).Scan(&locked, &prev); err != nil {
		return nil, fmt.Errorf("delete expired: sweep lock: %w", translate(err))
	}
	if !locked {
		return nil, store.ErrSweepBusy
	}
	rows, err := tx.Query(ctx, s.sql.deleteExpired, limit)
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", translate(err))
	}
	deleted, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.KeyRef, error) {
		var k store.KeyRef
		err := row.Scan(&k.Scope, &k.Key)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", translate(err))
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return nil, fmt.Errorf("delete expired: commit: %w", errors.Join(store.ErrTxAborted, err))
		}
		return nil, fmt.Errorf("delete expired: commit: %w", translate(err))
	}
	return deleted, nil
}
