package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/store"
)

var _ store.AuditTx = (*Tx)(nil)

var dialect = keytable.Dialect{
	Arg:  func(n int) string { return "$" + strconv.Itoa(n) },
	Time: func(t time.Time) any { return t },
}

// ListKeys searches the key table for an operator (see store.KeyLister).
func (s *Store) ListKeys(ctx context.Context, q store.KeyQuery) ([]store.Record, error) {
	sql, args := keytable.Search(engine.SearchQuery(q), recordColumns+", scope, idempotency_key", dialect)
	rows, err := s.pool.Query(ctx, keytable.Rewrite(sql, s.sql.table), args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	defer rows.Close()
	var recs []store.Record
	for rows.Next() {
		var scope, key string
		rec, err := scanRecord(rows, "", "", &scope, &key)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		rec.Scope, rec.Key = scope, key
		recs = append(recs, *rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", translate(err))
	}
	return recs, nil
}

// exactBelow is the table size under which CountKeys counts every state
// exactly; above it, COMPLETED and FAILED come from the planner's
// statistics, as counting them would read the whole table.
const exactBelow = 1_000_000

const countAll = `SELECT status, count(*) FROM idempotency_keys GROUP BY status`

const tableEstimate = `
SELECT greatest(c.reltuples, 0)::bigint,
       coalesce((SELECT s.most_common_vals::text::text[] FROM pg_stats s
                  WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = 'status'), '{}'),
       coalesce((SELECT s.most_common_freqs FROM pg_stats s
                  WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = 'status'), '{}')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = 'idempotency_keys'::regclass`

const countProcessing = `
SELECT count(*), min(created_at), now() FROM idempotency_keys WHERE status = 'PROCESSING'`

const countUnfinished = `
SELECT recovery_point, count(*), min(claimed_at) FROM idempotency_keys
 WHERE ` + keytable.Unfinished + ` GROUP BY recovery_point`

// CountKeys counts the records by state (see store.KeyLister): in flight
// and unfinished exactly, through their indexes; the others exactly on a
// table under a million rows, else estimated.
func (s *Store) CountKeys(ctx context.Context) (store.KeyCounts, error) {
	r := func(sql string) string { return keytable.Rewrite(sql, s.sql.table) }
	var c store.KeyCounts
	var oldest *time.Time
	if err := s.pool.QueryRow(ctx, r(countProcessing)).Scan(&c.Processing.N, &oldest, &c.Now); err != nil {
		return c, fmt.Errorf("count keys: %w", translate(err))
	}
	c.Processing.Exact = true
	if oldest != nil {
		c.OldestProcessing = *oldest
	}
	var (
		total int64
		vals  []string
		freqs []float64
	)
	if err := s.pool.QueryRow(ctx, r(tableEstimate)).Scan(&total, &vals, &freqs); err != nil {
		return c, fmt.Errorf("count keys: %w", translate(err))
	}
	if total < exactBelow {
		rows, err := s.pool.Query(ctx, r(countAll))
		if err != nil {
			return c, fmt.Errorf("count keys: %w", translate(err))
		}
		var status string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
			switch store.Status(status) {
			case store.StatusCompleted:
				c.Completed = store.KeyCount{N: n, Exact: true}
			case store.StatusFailed:
				c.Failed = store.KeyCount{N: n, Exact: true}
			}
			return nil
		})
		if err != nil {
			return c, fmt.Errorf("count keys: %w", translate(err))
		}
		c.Completed.Exact, c.Failed.Exact = true, true
	} else {
		for i, v := range vals {
			n := int64(freqs[i] * float64(total))
			switch store.Status(v) {
			case store.StatusCompleted:
				c.Completed.N = n
			case store.StatusFailed:
				c.Failed.N = n
			}
		}
	}
	rows, err := s.pool.Query(ctx, r(countUnfinished))
	if err != nil {
		return c, fmt.Errorf("count keys: %w", translate(err))
	}
	c.Unfinished = map[string]int64{}
	var (
		point string
		n     int64
		held  time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&point, &n, &held}, func() error {
		c.Unfinished[point] = n
		if c.OldestUnfinished.IsZero() || held.Before(c.OldestUnfinished) {
			c.OldestUnfinished = held
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("count keys: %w", translate(err))
	}
	return c, nil
}

const selectProviderKeys = `
SELECT provider_keys::text FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2`

// ProviderKeys reads the downstream keys recorded on a record (see
// store.KeyLister).
func (s *Store) ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error) {
	var column *string
	err := s.pool.QueryRow(ctx, keytable.Rewrite(selectProviderKeys, s.sql.table), scope, key).Scan(&column)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("provider keys: %w", translate(err))
	}
	return keytable.DecodeProviderKeys(column)
}

// AppendAudit records an operator's action (see store.AuditLog), in the
// transaction when on a Tx (store.AuditTx).
func (k keys) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	_, err := k.db.Exec(ctx, keytable.Rewrite(pgsql.AppendAudit, k.sql.table), e.Actor, e.Action, e.Reason, e.Scope, e.Key, e.Before, e.After)
	if err != nil {
		return fmt.Errorf("append audit: %w", translate(err))
	}
	return nil
}

// BeginAudit returns a transaction for an operator's action and its audit
// entry (see store.AuditLog).
func (s *Store) BeginAudit(ctx context.Context) (store.AuditTx, error) {
	tx, err := s.Begin(ctx, store.TxOptions{})
	if err != nil {
		return nil, err
	}
	return tx.(*Tx), nil
}

// ListAudit returns the latest operator actions (see store.AuditLog).
func (s *Store) ListAudit(ctx context.Context, ref store.KeyRef, limit int) ([]store.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, keytable.Rewrite(pgsql.ListAudit, s.sql.table), ref.Scope, ref.Key, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", translate(err))
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AuditEntry, error) {
		var e store.AuditEntry
		err := row.Scan(&e.At, &e.Actor, &e.Action, &e.Reason, &e.Scope, &e.Key, &e.Before, &e.After)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", translate(err))
	}
	return es, nil
}
