package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idem-dev/idem/store"
)

// DeleteExpired deletes at most limit records past their expiry, but no
// live claim, in one short transaction (see store.Capabilities.Sweep): with
// Statements.DeleteExpired, in one statement; else it locks the oldest
// expired rows, skipping rows another transaction holds (FOR UPDATE SKIP
// LOCKED: PostgreSQL 9.5, MySQL 8.0, MariaDB 10.6), and deletes them. Only
// one sweep per key table runs at a time; others get store.ErrSweepBusy.
func (e *Engine) DeleteExpired(ctx context.Context, limit int) ([]store.KeyRef, error) {
	if err := CheckLimit(e.name, "delete expired", limit); err != nil {
		return nil, err
	}
	sweep := e.sweep
	if sweep == nil {
		sweep = e.sweepTx
	}
	var refs []store.KeyRef
	err := sweep(ctx, func(q Executor, now time.Time) (err error) {
		if d := e.sql.DeleteExpired; d.SQL != "" {
			refs, err = collect(ctx, q, d.SQL, e.args(d, now, limit), scanKeyRef)
			return err
		}
		refs, err = collect(ctx, q, e.sql.SweepSelect.SQL, []any{limit}, scanKeyRef)
		if err != nil || len(refs) == 0 {
			return err
		}
		return e.deleteKeys(ctx, q, refs)
	})
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// deleteKeys deletes the records refs names, key by key, so that the
// delete locks these rows alone: MySQL scans the whole table for a (scope,
// idempotency_key) IN list, and would wait on rows other transactions
// hold.
func (e *Engine) deleteKeys(ctx context.Context, q Executor, refs []store.KeyRef) error {
	var b strings.Builder
	b.WriteString(e.sql.SweepDelete)
	args := make([]any, 0, 2*len(refs))
	for i, r := range refs {
		if i > 0 {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, "(scope = %s AND idempotency_key = %s)", e.dialect.Placeholder(2*i+1), e.dialect.Placeholder(2*i+2))
		args = append(args, r.Scope, r.Key)
	}
	_, err := q.Exec(ctx, b.String(), args...)
	return err
}

// sweepTx runs a sweep's batch in a READ COMMITTED transaction holding the
// dialect's sweep lock, or says store.ErrSweepBusy.
func (e *Engine) sweepTx(ctx context.Context, batch func(q Executor, now time.Time) error) error {
	c, err := e.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("delete expired: %w", err)
	}
	defer c.Close()
	if !e.dialect.SweepLockInTx {
		if err := e.sweepLock(ctx, SQL(c)); err != nil {
			return err
		}
		defer func() { _, _ = c.ExecContext(context.WithoutCancel(ctx), e.sql.SweepUnlock) }()
	}
	tx, err := c.BeginTx(ctx, txOptions)
	if err != nil {
		return fmt.Errorf("delete expired: begin: %w", e.Translate(err))
	}
	defer func() { _ = tx.Rollback() }()
	if e.dialect.SweepLockInTx {
		if err := e.sweepLock(ctx, SQL(tx)); err != nil {
			return err
		}
	}
	if err := batch(SQL(tx), time.Time{}); err != nil {
		return fmt.Errorf("delete expired: %w", e.Translate(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete expired: commit: %w", e.Translate(err))
	}
	return nil
}

// sweepLock takes the sweep lock without waiting, or says it is busy.
func (e *Engine) sweepLock(ctx context.Context, q Executor) error {
	var locked bool
	if err := q.QueryRow(ctx, e.sql.SweepLock).Scan(&locked); err != nil {
		return fmt.Errorf("delete expired: sweep lock: %w", e.Translate(err))
	}
	if !locked {
		return store.ErrSweepBusy
	}
	return nil
}
