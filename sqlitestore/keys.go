package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// querier is what the key SQL runs on: a transaction's connection, or the
// pool for a read.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// session runs key operations: the Store's each in a transaction of its
// own, a Tx's inside itself. Either hands fn the operation's one reading of
// the clock, taken once the write lock is held; every time the operation
// stores or compares is derived from it.
type session interface {
	// read runs fn where it sees the session's view of the key table.
	read(ctx context.Context, fn func(q querier, now time.Time) error) error
	// write runs fn holding the database's write lock.
	write(ctx context.Context, fn func(q querier, now time.Time) error) error
}

// keys runs the key-table SQL through a session. The SQL mirrors pgstore's
// statement by statement; SQLite's now() is replaced by the :now parameter.
type keys struct {
	s   session
	sql *statements // the store's, on its table
}

// micros is how the table stores a time: microseconds since the Unix epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

// recordColumns are a record's columns as scanRecord reads them.
var recordColumns = `request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token, claimed_at, lease_expires_at,
       lease_expires_at > :now,
       response_code, response_headers, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= :now AND ` + finished + ` AND ` + notAwaitingOperator + `,
       coalesce(recovery_point, '')`

var selectRecord = `
SELECT ` + recordColumns + `
  FROM idempotency_keys
 WHERE scope = :scope AND idempotency_key = :key`

// finished is true of a row that is not unfinished (keytable.Finished).
const finished = keytable.Finished

func (k keys) Get(ctx context.Context, scope, key string) (*store.Record, error) {
	var rec *store.Record
	err := k.s.read(ctx, func(q querier, now time.Time) (err error) {
		rec, err = k.getRecord(ctx, q, now, scope, key)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("read record: %w", err)
	}
	return rec, err
}

func (k keys) getRecord(ctx context.Context, q querier, now time.Time, scope, key string) (*store.Record, error) {
	rec := &store.Record{Scope: scope, Key: key}
	row := q.QueryRowContext(ctx, k.sql.selectRecord, sql.Named("now", micros(now)), sql.Named("scope", scope), sql.Named("key", key))
	if err := scanRecord(row, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// scanRecord reads recordColumns into rec, then into more, if any, the
// columns after them.
func scanRecord(row interface{ Scan(...any) error }, rec *store.Record, more ...any) error {
	var (
		lockedAt, lockExpiresAt, createdAt, expiresAt int64
		code                                          sql.NullInt64
		headers, resourceT, resourceI                 sql.NullString
		body                                          []byte
	)
	dest := []any{&rec.Fingerprint.Method, &rec.Fingerprint.Path, &rec.Fingerprint.Hash, &rec.Fingerprint.Version,
		&rec.Status, &rec.Attempts, &rec.Token, &lockedAt, &lockExpiresAt, &rec.LeaseLive,
		&code, &headers, &body, &resourceT, &resourceI,
		&createdAt, &expiresAt, &rec.Expired, &rec.RecoveryPoint}
	err := row.Scan(append(dest, more...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	rec.ClaimedAt, rec.LeaseExpiresAt = time.UnixMicro(lockedAt).UTC(), time.UnixMicro(lockExpiresAt).UTC()
	rec.CreatedAt, rec.ExpiresAt = time.UnixMicro(createdAt).UTC(), time.UnixMicro(expiresAt).UTC()
	if code.Valid {
		// A zero-length BLOB scans as nil; a stored response always has a
		// body, if an empty one.
		resp := &store.Response{StatusCode: int(code.Int64), Body: body}
		if body == nil {
			resp.Body = []byte{}
		}
		if headers.Valid {
			h, err := keytable.DecodeHeaders([]byte(headers.String))
			if err != nil {
				return fmt.Errorf("decode stored headers: %w", err)
			}
			resp.Header = h
		}
		resp.ResourceType, resp.ResourceID = resourceT.String, resourceI.String
		rec.Response = resp
	}
	return nil
}

const insertClaim = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at)
VALUES (:scope, :key, :method, :path, :hash, :version,
        'PROCESSING', 1, :token, :now, :now + :lock_for, :now, :now + :ttl)
ON CONFLICT (scope, idempotency_key) DO NOTHING`

// Insert claims the key with one INSERT … ON CONFLICT DO NOTHING. On
// conflict it reads the record in the same transaction: it holds the write
// lock, so the row it conflicted with is still there.
func (k keys) Insert(ctx context.Context, c store.Claim) (*store.Record, bool, error) {
	var (
		rec      *store.Record
		inserted bool
	)
	err := k.s.write(ctx, func(q querier, now time.Time) error {
		fp := c.Fingerprint
		res, err := q.ExecContext(ctx, k.sql.insertClaim,
			sql.Named("scope", c.Scope), sql.Named("key", c.Key),
			sql.Named("method", fp.Method), sql.Named("path", fp.Path), sql.Named("hash", fp.Hash), sql.Named("version", fp.Version),
			sql.Named("token", c.Token), sql.Named("now", micros(now)),
			sql.Named("lock_for", c.Lease.Microseconds()), sql.Named("ttl", c.TTL.Microseconds()))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			inserted = true
			return nil
		}
		rec, err = k.getRecord(ctx, q, now, c.Scope, c.Key)
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

// reacquire takes over a re-acquirable row that prevToken still holds. The
// token in the WHERE clause makes it a compare-and-swap: once one contender
// has changed the token, every other one matches no row. A row past
// retention starts a new life: new fingerprint, creation and expiry, unless
// it is unfinished (store.Advancer), which resumes in its life. As in
// PostgreSQL, every SET expression reads the row as it was before the
// update, so the three CASEs agree.
var reacquire = `
UPDATE idempotency_keys
   SET request_method = :method, request_path = :path, request_hash = :hash, fingerprint_version = :version,
       status = 'PROCESSING',
       attempts   = CASE WHEN expires_at <= :now AND ` + finished + ` THEN 1 ELSE attempts + 1 END,
       created_at = CASE WHEN expires_at <= :now AND ` + finished + ` THEN :now ELSE created_at END,
       recovery_point = CASE WHEN status = 'COMPLETED' THEN NULL ELSE recovery_point END,
       provider_keys  = CASE WHEN status = 'COMPLETED' THEN NULL ELSE provider_keys END,
       expires_at = MAX(expires_at, :now + :ttl),
       fencing_token = :token, claimed_at = :now, lease_expires_at = :now + :lock_for,
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :prev_token
   AND (status = 'FAILED'
        OR (status = 'PROCESSING' AND lease_expires_at <= :now)
        OR (status = 'COMPLETED' AND expires_at <= :now AND ` + notAwaitingOperator + `))`

func (k keys) Reacquire(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	fp := c.Fingerprint
	return k.takeOver(ctx, "re-acquire", k.sql.reacquire, func(now time.Time) []any {
		return []any{sql.Named("scope", c.Scope), sql.Named("key", c.Key),
			sql.Named("method", fp.Method), sql.Named("path", fp.Path), sql.Named("hash", fp.Hash), sql.Named("version", fp.Version),
			sql.Named("token", c.Token), sql.Named("now", micros(now)),
			sql.Named("lock_for", c.Lease.Microseconds()), sql.Named("ttl", c.TTL.Microseconds()),
			sql.Named("prev_token", prevToken)}
	})
}

// takeOver runs a compare-and-swap on one record (a re-acquire or a
// completer's take-over) holding the write lock, and reports whether it
// changed the row: the token in its WHERE clause lets one contender win.
func (k keys) takeOver(ctx context.Context, op, stmt string, args func(now time.Time) []any) (bool, error) {
	var won bool
	err := k.s.write(ctx, func(q querier, now time.Time) error {
		res, err := q.ExecContext(ctx, stmt, args(now)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		won = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return won, nil
}

const complete = `
UPDATE idempotency_keys
   SET status = 'COMPLETED', lease_expires_at = :now,
       response_code = :code, response_headers = :headers, response_body = :body,
       resource_type = nullif(:resource_type, ''), resource_id = nullif(:resource_id, '')
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

func (k keys) Complete(ctx context.Context, l store.Attempt, resp store.Response) error {
	return k.fenced(ctx, "complete", k.sql.complete, l, responseArgs(resp)...)
}

// responseArgs are a stored response's named parameters: :code,
// :headers (JSON text), :body, :resource_type and :resource_id.
func responseArgs(resp store.Response) []any {
	body := resp.Body
	if body == nil {
		body = []byte{} // NULL would mean "no response"
	}
	return []any{sql.Named("code", resp.StatusCode), sql.Named("headers", keytable.EncodeHeaders(resp.Header)), sql.Named("body", body),
		sql.Named("resource_type", resp.ResourceType), sql.Named("resource_id", resp.ResourceID)}
}

const fail = `
UPDATE idempotency_keys
   SET status = 'FAILED', lease_expires_at = :now
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

func (k keys) Fail(ctx context.Context, l store.Attempt) error {
	return k.fenced(ctx, "fail", k.sql.fail, l)
}

const renew = `
UPDATE idempotency_keys
   SET lease_expires_at = :now + :lock_for
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

func (k keys) Renew(ctx context.Context, l store.Attempt, d time.Duration) error {
	return k.fenced(ctx, "renew", k.sql.renew, l, sql.Named("lock_for", d.Microseconds()))
}

// fenced runs an update that must match the row l's token holds; matching
// none means another attempt holds it now.
func (k keys) fenced(ctx context.Context, op, query string, l store.Attempt, args ...any) error {
	err := k.s.write(ctx, func(q querier, now time.Time) error {
		args = append(args, sql.Named("scope", l.Scope), sql.Named("key", l.Key), sql.Named("token", l.Token),
			sql.Named("now", micros(now)))
		res, err := q.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			return store.ErrNotHeld
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
