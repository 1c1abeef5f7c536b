package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// numbered is a search's placeholder, $n, as keytable.Search writes it.
var numbered = regexp.MustCompile(`\$(\d+)`)

// ListKeys searches the key table for an operator (see
// store.Capabilities.Search). It reads on the pool, outside any
// transaction.
func (e *Engine) ListKeys(ctx context.Context, q store.KeyQuery) ([]store.Record, error) {
	var clock []any
	if e.dialect.Now != nil {
		// The store's clock is the first argument (Statements.Columns).
		clock = []any{e.dialect.Now(time.Now())}
	}
	query, args := keytable.Search(SearchQuery(q), e.sql.Columns+", scope, idempotency_key", e.sql.Search, clock...)
	if e.dialect.Placeholder(1) == "?" {
		// The search names an argument as often as it uses it ($1 in
		// each branch of a union): positional placeholders take it each
		// time.
		var pos []any
		query = numbered.ReplaceAllStringFunc(query, func(m string) string {
			n, _ := strconv.Atoi(m[1:])
			pos = append(pos, args[n-1])
			return "?"
		})
		args = pos
	}
	recs, err := collect(ctx, e.pool, keytable.Rewrite(query, e.table), args, func(r Row) (rec store.Record, err error) {
		err = e.scanRecord(r, &rec, &rec.Scope, &rec.Key)
		return rec, err
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", e.Translate(err))
	}
	return recs, nil
}

// CountKeys counts the records by state, exactly (see
// store.Capabilities.Search): on a large table it reads every row.
func (e *Engine) CountKeys(ctx context.Context) (store.KeyCounts, error) {
	c := store.KeyCounts{Now: time.Now().UTC()}
	if e.sql.Now != "" {
		if err := e.pool.QueryRow(ctx, e.sql.Now).Scan(e.timeDest(&c.Now)); err != nil {
			return c, fmt.Errorf("count keys: %w", e.Translate(err))
		}
	}
	err := e.each(ctx, e.sql.CountByStatus, func(status string, n int64, oldest time.Time) {
		k := store.KeyCount{N: n, Exact: true}
		switch store.Status(status) {
		case store.StatusProcessing:
			c.Processing, c.OldestProcessing = k, oldest
		case store.StatusCompleted:
			c.Completed = k
		case store.StatusFailed:
			c.Failed = k
		}
	})
	if err == nil {
		err = e.CountUnfinished(ctx, &c)
	}
	if err != nil {
		return c, fmt.Errorf("count keys: %w", err)
	}
	c.Processing.Exact, c.Completed.Exact, c.Failed.Exact = true, true, true
	return c, nil
}

// CountUnfinished sets c's unfinished records by recovery point and the
// oldest hold among them, counted through their index.
func (e *Engine) CountUnfinished(ctx context.Context, c *store.KeyCounts) error {
	c.Unfinished = map[string]int64{}
	return e.each(ctx, e.sql.CountUnfinished, func(point string, n int64, held time.Time) {
		c.Unfinished[point] = n
		if c.OldestUnfinished.IsZero() || held.Before(c.OldestUnfinished) {
			c.OldestUnfinished = held
		}
	})
}

// each runs a count, calling fn with each row's name, count and time.
func (e *Engine) each(ctx context.Context, query string, fn func(name string, n int64, t time.Time)) error {
	return e.Translate(e.pool.Query(ctx, query, nil, func(r Row) error {
		var (
			name string
			n    int64
			t    time.Time
		)
		if err := r.Scan(&name, &n, e.timeDest(&t)); err != nil {
			return err
		}
		fn(name, n, t)
		return nil
	}))
}

// ProviderKeys reads the downstream keys recorded on a record (see
// store.Capabilities.Search).
func (e *Engine) ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error) {
	var column sql.NullString
	p := e.sql.ProviderKeys
	err := e.pool.QueryRow(ctx, p.SQL, e.args(p, e.now(), scope, key)...).Scan(&column)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("provider keys: %w", e.Translate(err))
	}
	if !column.Valid {
		return keytable.DecodeProviderKeys(nil)
	}
	return keytable.DecodeProviderKeys(&column.String)
}

// ListCompleted lists the keys of COMPLETED records whose response has
// status code code, in primary-key order after after (see
// store.Capabilities.Resolve). It reads on the pool.
func (e *Engine) ListCompleted(ctx context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	if err := CheckLimit(e.name, "list completed", limit); err != nil {
		return nil, err
	}
	l := e.sql.ListCompleted
	refs, err := collect(ctx, e.pool, l.SQL, e.args(l, e.now(), code, after.Scope, after.Key, limit), scanKeyRef)
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", e.Translate(err))
	}
	return refs, nil
}

// Release reopens the COMPLETED record a's token holds: FAILED, its
// response dropped, so that the next retry runs afresh (see
// store.Capabilities.Resolve), in the transaction when on a Tx
// (store.AuditTx).
func (k Keys) Release(ctx context.Context, a store.Attempt) error {
	return k.fencedBy(ctx, "release", k.e.sql.Release, k.e.sql.HoldsCompleted, a, a.Scope, a.Key, a.Token)
}

// ReplaceResponse replaces the stored response of the COMPLETED record a's
// token holds (see store.Capabilities.Resolve). Where the driver counts
// changed rows only, a response the record has already changes no row: a
// read tells it from a lost hold. In the transaction when on a Tx
// (store.AuditTx).
func (k Keys) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	return k.fencedBy(ctx, "replace response", k.e.sql.ReplaceResponse, k.e.sql.HoldsCompleted, a, CompleteArgs(a, resp)...)
}

// AppendAudit records an operator's action, stamped with the store's
// clock (see store.Capabilities.AuditLog), in the transaction when on a Tx
// (store.AuditTx).
func (k Keys) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	a := k.e.sql.AppendAudit
	err := k.run(ctx, OpWrite, func(q Executor, now time.Time) error {
		_, err := q.Exec(ctx, a.SQL, k.e.args(a, now, e.Actor, e.Action, e.Reason, e.Scope, e.Key, e.Before, e.After)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// ListAudit returns the latest operator actions, newest first (see
// store.Capabilities.AuditLog).
func (e *Engine) ListAudit(ctx context.Context, ref store.KeyRef, limit int) ([]store.AuditEntry, error) {
	l := e.sql.ListAudit
	es, err := collect(ctx, e.pool, l.SQL, e.args(l, e.now(), ref.Scope, ref.Key, limit), func(r Row) (a store.AuditEntry, err error) {
		err = r.Scan(e.timeDest(&a.At), &a.Actor, &a.Action, &a.Reason, &a.Scope, &a.Key, &a.Before, &a.After)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", e.Translate(err))
	}
	return es, nil
}
