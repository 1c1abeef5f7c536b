package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// querier is what the key SQL runs on: the pool, a connection or a
// transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// session is where key operations run: the Store's each on its own, a
// Tx's inside itself.
type session interface {
	// read returns where a read sees the session's view of the table.
	read(ctx context.Context) (querier, error)
	// write returns where a write runs.
	write(ctx context.Context) (querier, error)
	// bounded runs fn, a statement that may wait on a row another
	// transaction holds, with that wait bounded by the session's MaxWait.
	bounded(ctx context.Context, fn func(q querier) (sql.Result, error)) (sql.Result, error)
}

// keys runs the key-table SQL through a session. Every time is the
// database's.
type keys struct {
	st *Store
	s  session
}

func (k keys) Get(ctx context.Context, scope, key string) (*store.Record, error) {
	q, err := k.s.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	g := k.st.sql.get
	rec, err := scanRecord(q.QueryRowContext(ctx, g.sql, g.args(scope, key)...), scope, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read record: %w", k.st.translate(err))
	}
	return rec, err
}

// row is a result row: *sql.Row or *sql.Rows.
type row interface{ Scan(dest ...any) error }

// scanRecord reads the record columns, then into more, if any, the
// columns after them.
func scanRecord(r row, scope, key string, more ...any) (*store.Record, error) {
	rec := &store.Record{Scope: scope, Key: key}
	var (
		code                 sql.NullInt64
		headers, body        []byte
		resourceT, resourceI sql.NullString
	)
	err := r.Scan(append([]any{&rec.Fingerprint.Method, &rec.Fingerprint.Path, &rec.Fingerprint.Hash, &rec.Fingerprint.Version,
		&rec.Status, &rec.Attempts, &rec.Token, dbTime{&rec.ClaimedAt}, dbTime{&rec.LeaseExpiresAt}, &rec.LeaseLive,
		&code, &headers, &body, &resourceT, &resourceI,
		dbTime{&rec.CreatedAt}, dbTime{&rec.ExpiresAt}, &rec.Expired, &rec.RecoveryPoint}, more...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if code.Valid {
		resp := &store.Response{StatusCode: int(code.Int64), Body: body, ResourceType: resourceT.String, ResourceID: resourceI.String}
		if body == nil {
			resp.Body = []byte{}
		}
		if headers != nil {
			h, err := keytable.DecodeHeaders(headers)
			if err != nil {
				return nil, fmt.Errorf("decode stored headers: %w", err)
			}
			resp.Header = h
		}
		rec.Response = resp
	}
	return rec, nil
}

// Insert claims the key with one insert that does nothing on a recorded
// key. On conflict it reads the record with a second statement: in READ
// COMMITTED a new statement sees the row a concurrent transaction just
// committed.
func (k keys) Insert(ctx context.Context, c store.Claim) (*store.Record, bool, error) {
	fp := c.Fingerprint
	s := k.st.sql.insert
	res, err := k.s.bounded(ctx, func(q querier) (sql.Result, error) {
		return q.ExecContext(ctx, s.sql, s.args(c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version,
			c.Token, c.Lease.Microseconds(), c.TTL.Microseconds())...)
	})
	if err != nil {
		return nil, false, fmt.Errorf("insert claim: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, fmt.Errorf("insert claim: %w", err)
	} else if n == 1 {
		return nil, true, nil
	}
	rec, err := k.Get(ctx, c.Scope, c.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return rec, false, err
}

// Reacquire takes over a re-acquirable record that prevToken still holds:
// the token in the WHERE clause makes the update a compare-and-swap.
func (k keys) Reacquire(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	fp := c.Fingerprint
	return k.takeOver(ctx, "re-acquire", k.st.sql.reacquire, c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version,
		c.Token, c.Lease.Microseconds(), c.TTL.Microseconds(), prevToken)
}

// takeOver runs s, a compare-and-swap on one record (a re-acquire or a
// completer's take-over) with a bounded wait for its row, and reports
// whether it changed the row: the token in its WHERE clause lets one
// contender win.
func (k keys) takeOver(ctx context.Context, op string, s stmt, args ...any) (bool, error) {
	res, err := k.s.bounded(ctx, func(q querier) (sql.Result, error) {
		return q.ExecContext(ctx, s.sql, s.args(args...)...)
	})
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return n == 1, nil
}

func (k keys) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	return k.fenced(ctx, "complete", k.st.sql.complete, a, appendResponseArgs(append(make([]any, 0, 3+responseArgCount), a.Scope, a.Key, a.Token), resp)...)
}

// responseArgCount is the number of parameters appendResponseArgs appends.
const responseArgCount = 5

// appendResponseArgs appends a stored response's parameters to args:
// status code, headers (JSON text), body, resource type and id.
func appendResponseArgs(args []any, resp store.Response) []any {
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return append(args, resp.StatusCode, keytable.EncodeHeaders(resp.Header), body, resp.ResourceType, resp.ResourceID)
}

func (k keys) Fail(ctx context.Context, a store.Attempt) error {
	return k.fenced(ctx, "fail", k.st.sql.fail, a, a.Scope, a.Key, a.Token)
}

func (k keys) Renew(ctx context.Context, a store.Attempt, d time.Duration) error {
	return k.fenced(ctx, "renew", k.st.sql.renew, a, a.Scope, a.Key, a.Token, d.Microseconds())
}

// fenced runs an update that must match the row a's token holds; matching
// none means another attempt holds it now. Where the driver counts changed
// rows only, an update that changed nothing (a renewal to the same
// microsecond) is told from a lost key by a read.
func (k keys) fenced(ctx context.Context, op string, s stmt, a store.Attempt, args ...any) error {
	return k.fencedBy(ctx, op, s, k.st.sql.holds, a, args...)
}

// fencedBy is fenced, telling an update that changed nothing from a lost
// hold with holds.
func (k keys) fencedBy(ctx context.Context, op string, s, holds stmt, a store.Attempt, args ...any) error {
	q, err := k.s.write(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	res, err := q.ExecContext(ctx, s.sql, s.args(args...)...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, k.st.translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 && k.st.dialect.changedRows {
		if err := q.QueryRowContext(ctx, holds.sql, holds.args(a.Scope, a.Key, a.Token)...).Scan(&n); err != nil {
			return fmt.Errorf("%s: %w", op, k.st.translate(err))
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotHeld)
	}
	return nil
}

// dbTime scans a database time into a UTC time.Time: a time.Time from a
// driver that parses times (pgx, lib/pq, go-sql-driver/mysql with
// parseTime=true), or MySQL's text form from one that does not.
type dbTime struct{ t *time.Time }

func (d dbTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*d.t = v.UTC()
		return nil
	case []byte:
		return d.parse(string(v))
	case string:
		return d.parse(v)
	}
	return fmt.Errorf("sqlstore: cannot scan %T into a time", src)
}

func (d dbTime) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return fmt.Errorf("sqlstore: parse time: %w", err)
	}
	*d.t = t
	return nil
}
