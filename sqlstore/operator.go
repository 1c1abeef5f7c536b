package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// The operator's capabilities, as pgstore's: searching and counting the
// records (the console), resolving a record by hand (idem-gateway's keys
// resolve) and the audit log of those actions. The middleware calls none.
var (
	_ store.KeyLister   = (*Store)(nil)
	_ store.KeyResolver = (*Store)(nil)
	_ store.AuditLog    = (*Store)(nil)
	_ store.AuditTx     = (*Tx)(nil)
)

const countByStatus = `
SELECT status, COUNT(*), MIN(created_at) FROM idempotency_keys GROUP BY status`

// numbered is a search's placeholder, $n, as keytable.Search writes it.
var numbered = regexp.MustCompile(`\$(\d+)`)

// ListKeys searches the key table for an operator (see store.KeyLister).
func (s *Store) ListKeys(ctx context.Context, q store.KeyQuery) ([]store.Record, error) {
	query, args := keytable.Search(keytable.Query{Scope: q.Scope, Key: q.Key, Status: string(q.Status), Unfinished: q.Unfinished,
		ResponseCode: q.ResponseCode, PathPrefix: q.PathPrefix, CreatedBefore: q.CreatedBefore, Limit: q.MaxRecords()},
		s.sql.columns+", scope, idempotency_key", s.sql.search)
	if s.dialect.placeholder(1) == "?" {
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
	rows, err := s.db.QueryContext(ctx, keytable.Rewrite(query, s.table), args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", s.translate(err))
	}
	defer rows.Close()
	var recs []store.Record
	for rows.Next() {
		var scope, key string
		rec, err := scanRecord(rows, "", "", &scope, &key)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", s.translate(err))
		}
		rec.Scope, rec.Key = scope, key
		recs = append(recs, *rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", s.translate(err))
	}
	return recs, nil
}

// CountKeys counts the records by state, exactly (see store.KeyLister):
// on a large table it reads every row.
func (s *Store) CountKeys(ctx context.Context) (store.KeyCounts, error) {
	c := store.KeyCounts{Unfinished: map[string]int64{}}
	if err := s.db.QueryRowContext(ctx, s.sql.now).Scan(dbTime{&c.Now}); err != nil {
		return c, fmt.Errorf("count keys: %w", s.translate(err))
	}
	err := s.each(ctx, s.sql.countByStatus, func(status string, n int64, oldest time.Time) {
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
		err = s.each(ctx, s.sql.countUnfinished, func(point string, n int64, held time.Time) {
			c.Unfinished[point] = n
			if c.OldestUnfinished.IsZero() || held.Before(c.OldestUnfinished) {
				c.OldestUnfinished = held
			}
		})
	}
	c.Processing.Exact, c.Completed.Exact, c.Failed.Exact = true, true, true
	return c, err
}

// each runs a count, calling fn with each row's name, count and time.
func (s *Store) each(ctx context.Context, query string, fn func(name string, n int64, t time.Time)) error {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("count keys: %w", s.translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name string
			n    int64
			t    time.Time
		)
		if err := rows.Scan(&name, &n, dbTime{&t}); err != nil {
			return fmt.Errorf("count keys: %w", s.translate(err))
		}
		fn(name, n, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count keys: %w", s.translate(err))
	}
	return nil
}

// ProviderKeys reads the downstream keys recorded on a record (see
// store.KeyLister).
func (s *Store) ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error) {
	var column sql.NullString
	p := s.sql.providerKeys
	err := s.db.QueryRowContext(ctx, p.sql, p.args(scope, key)...).Scan(&column)
	if err == sql.ErrNoRows {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("provider keys: %w", s.translate(err))
	}
	if !column.Valid {
		return keytable.DecodeProviderKeys(nil)
	}
	return keytable.DecodeProviderKeys(&column.String)
}

// ListCompleted lists the keys of COMPLETED records whose response has
// status code code, in primary-key order after after (see
// store.KeyResolver).
func (s *Store) ListCompleted(ctx context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlstore: list completed: limit must be positive, got %d", limit)
	}
	l := s.sql.listCompleted
	rows, err := s.db.QueryContext(ctx, l.sql, l.args(code, after.Scope, after.Key, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", s.translate(err))
	}
	defer rows.Close()
	var refs []store.KeyRef
	for rows.Next() {
		var r store.KeyRef
		if err := rows.Scan(&r.Scope, &r.Key); err != nil {
			return nil, fmt.Errorf("list completed: %w", s.translate(err))
		}
		refs = append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list completed: %w", s.translate(err))
	}
	return refs, nil
}

// Release reopens the COMPLETED record a's token holds: FAILED, its
// response dropped, so that the next retry runs afresh (see
// store.KeyResolver), in the transaction when on a Tx (store.AuditTx).
func (k keys) Release(ctx context.Context, a store.Attempt) error {
	return k.fencedBy(ctx, "release", k.st.sql.release, k.st.sql.holdsCompleted, a, a.Scope, a.Key, a.Token)
}

// ReplaceResponse replaces the stored response of the COMPLETED record a's
// token holds (see store.KeyResolver). On MySQL, a response the record
// has already changes no row: a read tells it from a lost hold. In the
// transaction when on a Tx (store.AuditTx).
func (k keys) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	return k.fencedBy(ctx, "replace response", k.st.sql.replaceResponse, k.st.sql.holdsCompleted, a, appendResponseArgs([]any{a.Scope, a.Key, a.Token}, resp)...)
}

// AppendAudit records an operator's action, stamped with the database's
// clock (see store.AuditLog), in the transaction when on a Tx
// (store.AuditTx).
func (k keys) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	q, err := k.s.write(ctx)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	a := k.st.sql.appendAudit
	if _, err := q.ExecContext(ctx, a.sql, a.args(e.Actor, e.Action, e.Reason, e.Scope, e.Key, e.Before, e.After)...); err != nil {
		return fmt.Errorf("append audit: %w", k.st.translate(err))
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

// ListAudit returns the latest operator actions, newest first (see
// store.AuditLog).
func (s *Store) ListAudit(ctx context.Context, ref store.KeyRef, limit int) ([]store.AuditEntry, error) {
	l := s.sql.listAudit
	rows, err := s.db.QueryContext(ctx, l.sql, l.args(ref.Scope, ref.Key, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", s.translate(err))
	}
	defer rows.Close()
	var es []store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		if err := rows.Scan(dbTime{&e.At}, &e.Actor, &e.Action, &e.Reason, &e.Scope, &e.Key, &e.Before, &e.After); err != nil {
			return nil, fmt.Errorf("list audit: %w", s.translate(err))
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", s.translate(err))
	}
	return es, nil
}
