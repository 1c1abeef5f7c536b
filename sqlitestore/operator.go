package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

var (
	_ store.KeyLister = (*Store)(nil)
	_ store.AuditLog  = (*Store)(nil)
)

var dialect = keytable.Dialect{
	Arg:  func(n int) string { return "?" + strconv.Itoa(n) },
	Time: func(t time.Time) any { return micros(t) },
}

// ListKeys searches the key table for an operator (see store.KeyLister).
// It reads without the write lock.
func (s *Store) ListKeys(ctx context.Context, q store.KeyQuery) ([]store.Record, error) {
	// The store's clock is the first argument.
	cols := strings.ReplaceAll(recordColumns, ":now", "?1") + ", scope, idempotency_key"
	query, args := keytable.Search(keytable.Query{Scope: q.Scope, Key: q.Key, Status: string(q.Status), Unfinished: q.Unfinished,
		ResponseCode: q.ResponseCode, PathPrefix: q.PathPrefix, CreatedBefore: q.CreatedBefore, Limit: q.MaxRecords()}, cols, dialect, micros(time.Now()))
	rows, err := s.db.QueryContext(ctx, keytable.Rewrite(query, s.sql.table), args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	defer rows.Close()
	var recs []store.Record
	for rows.Next() {
		var rec store.Record
		if err := scanRecord(rows, &rec, &rec.Scope, &rec.Key); err != nil {
			return nil, fmt.Errorf("list keys: %w", translate(err))
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	return recs, nil
}

const countByStatus = `
SELECT status, count(*), min(created_at) FROM idempotency_keys GROUP BY status`

const countUnfinished = `
SELECT recovery_point, count(*), min(claimed_at) FROM idempotency_keys
 WHERE ` + keytable.Unfinished + ` GROUP BY recovery_point`

// CountKeys counts the records by state, exactly (see store.KeyLister).
func (s *Store) CountKeys(ctx context.Context) (store.KeyCounts, error) {
	c := store.KeyCounts{Now: time.Now().UTC(), Unfinished: map[string]int64{}}
	err := s.each(ctx, countByStatus, func(status string, n, oldest int64) {
		k := store.KeyCount{N: n, Exact: true}
		switch store.Status(status) {
		case store.StatusProcessing:
			c.Processing, c.OldestProcessing = k, time.UnixMicro(oldest).UTC()
		case store.StatusCompleted:
			c.Completed = k
		case store.StatusFailed:
			c.Failed = k
		}
	})
	if err == nil {
		err = s.each(ctx, countUnfinished, func(point string, n, held int64) {
			c.Unfinished[point] = n
			if t := time.UnixMicro(held).UTC(); c.OldestUnfinished.IsZero() || t.Before(c.OldestUnfinished) {
				c.OldestUnfinished = t
			}
		})
	}
	if err != nil {
		return c, fmt.Errorf("count keys: %w", translate(err))
	}
	c.Processing.Exact, c.Completed.Exact, c.Failed.Exact = true, true, true
	return c, nil
}

// each runs a count grouped by a text column and passes each row to fn.
func (s *Store) each(ctx context.Context, query string, fn func(group string, n, oldest int64)) error {
	rows, err := s.db.QueryContext(ctx, keytable.Rewrite(query, s.sql.table))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			group     string
			n, oldest int64
		)
		if err := rows.Scan(&group, &n, &oldest); err != nil {
			return err
		}
		fn(group, n, oldest)
	}
	return rows.Err()
}

const selectProviderKeys = `
SELECT provider_keys FROM idempotency_keys WHERE scope = ?1 AND idempotency_key = ?2`

// ProviderKeys reads the downstream keys recorded on a record (see
// store.KeyLister).
func (s *Store) ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error) {
	var column *string
	err := s.db.QueryRowContext(ctx, keytable.Rewrite(selectProviderKeys, s.sql.table), scope, key).Scan(&column)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("provider keys: %w", translate(err))
	}
	return keytable.DecodeProviderKeys(column)
}

const appendAudit = `
INSERT INTO idempotency_keys_audit (at, actor, action, reason, scope, idempotency_key, before, after)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`

// AppendAudit records an operator's action (see store.AuditLog).
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	err := s.keys.s.write(ctx, func(q querier, now time.Time) error {
		_, err := q.ExecContext(ctx, keytable.Rewrite(appendAudit, s.sql.table),
			micros(now), e.Actor, e.Action, e.Reason, e.Scope, e.Key, e.Before, e.After)
		return err
	})
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

const listAudit = `
SELECT at, actor, action, reason, scope, idempotency_key, before, after
  FROM idempotency_keys_audit
 WHERE ?1 = '' OR (scope = ?1 AND idempotency_key = ?2)
 ORDER BY id DESC LIMIT ?3`

// ListAudit returns the latest operator actions (see store.AuditLog).
func (s *Store) ListAudit(ctx context.Context, ref store.KeyRef, limit int) ([]store.AuditEntry, error) {
	rows, err := s.db.QueryContext(ctx, keytable.Rewrite(listAudit, s.sql.table), ref.Scope, ref.Key, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", translate(err))
	}
	defer rows.Close()
	var es []store.AuditEntry
	for rows.Next() {
		var (
			e  store.AuditEntry
			at int64
		)
		if err := rows.Scan(&at, &e.Actor, &e.Action, &e.Reason, &e.Scope, &e.Key, &e.Before, &e.After); err != nil {
			return nil, fmt.Errorf("list audit: %w", translate(err))
		}
		e.At = time.UnixMicro(at).UTC()
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", translate(err))
	}
	return es, nil
}
