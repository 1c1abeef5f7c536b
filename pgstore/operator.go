package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

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

// CountKeys counts the records by state (see store.Capabilities.Search): in
// flight and unfinished exactly, through their indexes; the others exactly
// on a table under a million rows, else estimated.
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
	if err := s.e.CountUnfinished(ctx, &c); err != nil {
		return c, fmt.Errorf("count keys: %w", err)
	}
	return c, nil
}

// BeginAudit returns a transaction for an operator's action and its audit
// entry (see store.Capabilities.AuditLog).
func (s *Store) BeginAudit(ctx context.Context) (store.AuditTx, error) {
	tx, err := s.Begin(ctx, store.TxOptions{})
	if err != nil {
		return nil, err
	}
	return tx.(*Tx), nil
}
