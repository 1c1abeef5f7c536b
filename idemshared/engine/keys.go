package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// Op is the kind of a key operation, as a Session runs it.
type Op int

const (
	// OpRead reads where the session sees its view of the key table.
	OpRead Op = iota
	// OpWrite is a fenced write, where the session writes.
	OpWrite
	// OpClaim is a statement that may wait on a row another transaction
	// holds (a claim, a take-over), with that wait bounded by the
	// session's bound.
	OpClaim
)

// Session is where key operations run: a Store's each on its own, a Tx's
// inside itself. Begin and End bracket each operation, and the engine runs
// its statements in between: no closure goes through the interface, where
// each would cost the request path an allocation.
type Session interface {
	// Begin starts an operation of kind op. It returns where its
	// statements run and the operation's one reading of the store's
	// clock (Dialect.Now; the zero time where the database's clock is the
	// store's). After an error End is not called.
	Begin(ctx context.Context, op Op) (q Executor, now time.Time, err error)
	// End ends the operation Begin started on q, whose statements ended
	// with err: it commits or rolls back what Begin began, and returns
	// the error translated into the store package's (Engine.Translate).
	// again: the database rolled the operation back as a deadlock's
	// victim and nothing else was lost with it, so it may run again.
	End(ctx context.Context, op Op, q Executor, err error) (again bool, _ error)
}

// Keys runs the key-table SQL through a session: store.Keys, and the
// fenced operations of the optional interfaces.
type Keys struct {
	e *Engine
	s Session
}

// NewKeys returns the key operations of e run through s.
func NewKeys(e *Engine, s Session) Keys { return Keys{e: e, s: s} }

// run runs fn as an operation of kind op in the session, and again, at
// most deadlockRetries times, while the session says it may.
func (k Keys) run(ctx context.Context, op Op, fn func(q Executor, now time.Time) error) error {
	for attempt := 0; ; attempt++ {
		q, now, err := k.s.Begin(ctx, op)
		if err != nil {
			return err
		}
		again, err := k.s.End(ctx, op, q, fn(q, now))
		if !again || attempt == deadlockRetries {
			return err
		}
	}
}

func (k Keys) Get(ctx context.Context, scope, key string) (*store.Record, error) {
	var rec *store.Record
	err := k.run(ctx, OpRead, func(q Executor, now time.Time) (err error) {
		rec, err = k.get(ctx, q, now, scope, key)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read record: %w", err)
	}
	return rec, err
}

func (k Keys) get(ctx context.Context, q Executor, now time.Time, scope, key string) (*store.Record, error) {
	g := k.e.sql.Get
	rec := &store.Record{Scope: scope, Key: key}
	if err := k.e.scanRecord(q.QueryRow(ctx, g.SQL, k.e.args(g, now, scope, key)...), rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// scanRecord reads the record columns into rec, then into more, if any,
// the columns after them.
func (e *Engine) scanRecord(r Row, rec *store.Record, more ...any) error {
	var (
		code                 sql.NullInt64
		headers, body        []byte
		resourceT, resourceI sql.NullString
	)
	err := r.Scan(append([]any{&rec.Fingerprint.Method, &rec.Fingerprint.Path, &rec.Fingerprint.Hash, &rec.Fingerprint.Version,
		&rec.Status, &rec.Attempts, &rec.Token, e.timeDest(&rec.ClaimedAt), e.timeDest(&rec.LeaseExpiresAt), &rec.LeaseLive,
		&code, &headers, &body, &resourceT, &resourceI,
		e.timeDest(&rec.CreatedAt), e.timeDest(&rec.ExpiresAt), &rec.Expired, &rec.RecoveryPoint,
		nullTime{dbTime{&rec.CompletedAt}}}, more...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	if code.Valid {
		// A zero-length BLOB scans as nil; a stored response always has a
		// body, if an empty one.
		resp := &store.Response{StatusCode: int(code.Int64), Body: body, ResourceType: resourceT.String, ResourceID: resourceI.String}
		if body == nil {
			resp.Body = []byte{}
		}
		if headers != nil {
			h, err := keytable.DecodeHeaders(headers)
			if err != nil {
				return fmt.Errorf("decode stored headers: %w", err)
			}
			resp.Header = h
		}
		rec.Response = resp
	}
	return nil
}

// Insert claims the key with one insert that does nothing on a recorded
// key. On conflict it reads the record with a second statement: in READ
// COMMITTED a new statement sees the row a concurrent transaction just
// committed, and under SQLite's write lock the row is still there.
func (k Keys) Insert(ctx context.Context, c store.Claim) (*store.Record, bool, error) {
	var (
		rec      *store.Record
		inserted bool
	)
	fp := c.Fingerprint
	s := k.e.sql.Insert
	err := k.run(ctx, OpClaim, func(q Executor, now time.Time) error {
		n, err := q.Exec(ctx, s.SQL, k.e.args(s, now, c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version,
			c.Token, c.Lease.Microseconds(), c.TTL.Microseconds())...)
		if err != nil {
			return err
		}
		if n == 1 {
			inserted = true
			return nil
		}
		rec, err = k.get(ctx, q, now, c.Scope, c.Key)
		if errors.Is(err, store.ErrNotFound) {
			return nil // as the interface allows: the caller tries again
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("insert claim: %w", err)
	}
	return rec, inserted, nil
}

// Reacquire takes over a re-acquirable record that prevToken still holds:
// the token in the WHERE clause makes the update a compare-and-swap.
func (k Keys) Reacquire(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	fp := c.Fingerprint
	return k.takeOver(ctx, "re-acquire", k.e.sql.Reacquire, c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version,
		c.Token, c.Lease.Microseconds(), c.TTL.Microseconds(), prevToken)
}

// ResumeUnfinished takes over the unfinished record prevToken last held,
// only while it is still that abandoned unfinished record
// (store.Capabilities.Unfinished).
func (k Keys) ResumeUnfinished(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	return k.takeOver(ctx, "resume unfinished", k.e.sql.ResumeUnfinished, c.Scope, c.Key, c.Token,
		c.Lease.Microseconds(), c.TTL.Microseconds(), prevToken)
}

// takeOver runs s, a compare-and-swap on one record (a re-acquire or a
// completer's take-over) with a bounded wait for its row, and reports
// whether it changed the row: the token in its WHERE clause lets one
// contender win.
func (k Keys) takeOver(ctx context.Context, op string, s Stmt, args ...any) (bool, error) {
	var won bool
	err := k.run(ctx, OpClaim, func(q Executor, now time.Time) error {
		n, err := q.Exec(ctx, s.SQL, k.e.args(s, now, args...)...)
		won = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return won, nil
}

func (k Keys) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	return k.fenced(ctx, "complete", k.e.sql.Complete, a, CompleteArgs(a, resp)...)
}

// CompleteArgs are the canonical arguments of Statements.Complete and
// ReplaceResponse: scope, key, token and the response's.
func CompleteArgs(a store.Attempt, resp store.Response) []any {
	return appendResponseArgs(append(make([]any, 0, 3+responseArgCount), a.Scope, a.Key, a.Token), resp)
}

// InsertCompletedArgs are the canonical arguments of
// Statements.InsertCompleted: the claim's and the response's.
func InsertCompletedArgs(c store.Claim, resp store.Response) []any {
	fp := c.Fingerprint
	return appendResponseArgs(append(make([]any, 0, 8+responseArgCount),
		c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version, c.Token, c.TTL.Microseconds()), resp)
}

// responseArgCount is the number of parameters appendResponseArgs appends.
const responseArgCount = 5

// appendResponseArgs appends a stored response's parameters to args:
// status code, headers (JSON text), body, resource type and id.
func appendResponseArgs(args []any, resp store.Response) []any {
	body := resp.Body
	if body == nil {
		body = []byte{} // NULL would mean "no response"
	}
	return append(args, resp.StatusCode, keytable.EncodeHeaders(resp.Header), body, resp.ResourceType, resp.ResourceID)
}

func (k Keys) Fail(ctx context.Context, a store.Attempt) error {
	return k.fenced(ctx, "fail", k.e.sql.Fail, a, a.Scope, a.Key, a.Token)
}

func (k Keys) Renew(ctx context.Context, a store.Attempt, d time.Duration) error {
	return k.fenced(ctx, "renew", k.e.sql.Renew, a, a.Scope, a.Key, a.Token, d.Microseconds())
}

// fenced runs an update that must match the row a's token holds; matching
// none means another attempt holds it now. Where the driver counts changed
// rows only, an update that changed nothing (a renewal to the same
// microsecond) is told from a lost key by a read.
func (k Keys) fenced(ctx context.Context, op string, s Stmt, a store.Attempt, args ...any) error {
	return k.fencedBy(ctx, op, s, k.e.sql.Holds, a, args...)
}

// fencedBy is fenced, telling an update that changed nothing from a lost
// hold with holds.
func (k Keys) fencedBy(ctx context.Context, op string, s, holds Stmt, a store.Attempt, args ...any) error {
	err := k.run(ctx, OpWrite, func(q Executor, now time.Time) error {
		n, err := q.Exec(ctx, s.SQL, k.e.args(s, now, args...)...)
		if err != nil {
			return err
		}
		if n == 0 && k.e.dialect.ChangedRows {
			if err := q.QueryRow(ctx, holds.SQL, k.e.args(holds, now, a.Scope, a.Key, a.Token)...).Scan(&n); err != nil {
				return err
			}
		}
		if n == 0 {
			return store.ErrNotHeld
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// dbTime scans a database time into a UTC time.Time: a time.Time from a
// driver that parses times (pgx, lib/pq, go-sql-driver/mysql with
// parseTime=true), MySQL's text form from one that does not, or the
// microseconds since the Unix epoch that SQLite's table keeps.
type dbTime struct{ t *time.Time }

func (d dbTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*d.t = v.UTC()
		return nil
	case int64:
		*d.t = time.UnixMicro(v).UTC()
		return nil
	case []byte:
		return d.parse(string(v))
	case string:
		return d.parse(v)
	}
	return fmt.Errorf("cannot scan %T into a time", src)
}

// nullTime is dbTime for a nullable column, whatever the driver: NULL
// scans as the zero time.
type nullTime struct{ dbTime }

func (n nullTime) Scan(src any) error {
	if src == nil {
		*n.t = time.Time{}
		return nil
	}
	return n.dbTime.Scan(src)
}

func (d dbTime) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return fmt.Errorf("parse time: %w", err)
	}
	*d.t = t
	return nil
}
