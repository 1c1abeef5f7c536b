package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// conn is what the key operations run on: the pool (each statement its own
// transaction) or a transaction.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// keys runs the key-table SQL on a conn. Every time is the database's.
type keys struct {
	db  conn
	sql *statements // the store's, on its table
	// lockWait bounds the waits of Insert and Reacquire on a row another
	// transaction holds.
	lockWait time.Duration
}

// recordColumns are a record's columns as scanRecord reads them.
var recordColumns = `request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token::text, claimed_at, lease_expires_at,
       lease_expires_at > now(),
       response_code, response_headers, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= now() AND ` + finished + ` AND ` + pgsql.NotAwaitingOperator + `,
       coalesce(recovery_point, '')`

var selectRecord = `
SELECT ` + recordColumns + `
  FROM idempotency_keys
 WHERE scope = $1 AND idempotency_key = $2`

// finished is true of a row that is not unfinished (keytable.Finished).
const finished = keytable.Finished

func (k keys) Get(ctx context.Context, scope, key string) (*store.Record, error) {
	return scanRecord(k.db.QueryRow(ctx, k.sql.selectRecord, scope, key), scope, key)
}

// scanRecord reads recordColumns, then into more, if any, the columns
// after them.
func scanRecord(row pgx.Row, scope, key string, more ...any) (*store.Record, error) {
	rec := &store.Record{Scope: scope, Key: key}
	var (
		code                 *int32
		headers, body        []byte
		resourceT, resourceI *string
	)
	dest := []any{&rec.Fingerprint.Method, &rec.Fingerprint.Path, &rec.Fingerprint.Hash, &rec.Fingerprint.Version,
		&rec.Status, &rec.Attempts, &rec.Token, &rec.ClaimedAt, &rec.LeaseExpiresAt, &rec.LeaseLive,
		&code, &headers, &body, &resourceT, &resourceI,
		&rec.CreatedAt, &rec.ExpiresAt, &rec.Expired, &rec.RecoveryPoint}
	err := row.Scan(append(dest, more...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read record: %w", translate(err))
	}
	if code != nil {
		resp := &store.Response{StatusCode: int(*code), Body: body}
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
		if resourceT != nil {
			resp.ResourceType = *resourceT
		}
		if resourceI != nil {
			resp.ResourceID = *resourceI
		}
		rec.Response = resp
	}
	return rec, nil
}

// Insert claims the key with one INSERT … ON CONFLICT DO NOTHING. On
// conflict it reads the record with a second statement: in READ COMMITTED a
// new statement sees the row that a concurrent transaction just committed,
// which the INSERT's own snapshot may not.
func (k keys) Insert(ctx context.Context, c store.Claim) (*store.Record, bool, error) {
	fp := c.Fingerprint
	tag, err := k.bounded(ctx, k.sql.insertClaim, c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version,
		c.Token, c.Lease.Microseconds(), c.TTL.Microseconds())
	if err != nil {
		return nil, false, fmt.Errorf("insert claim: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil, true, nil
	}
	rec, err := k.Get(ctx, c.Scope, c.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return rec, false, err
}

func (k keys) Reacquire(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	fp := c.Fingerprint
	tag, err := k.bounded(ctx, k.sql.reacquire, c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version,
		c.Token, c.Lease.Microseconds(), c.TTL.Microseconds(), prevToken)
	if err != nil {
		return false, fmt.Errorf("re-acquire: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (k keys) Complete(ctx context.Context, l store.Attempt, resp store.Response) error {
	return k.fenced(ctx, "complete", k.sql.complete, completeArgs(l, resp)...)
}

func completeArgs(l store.Attempt, resp store.Response) []any {
	return appendResponseArgs(append(make([]any, 0, 3+responseArgCount), l.Scope, l.Key, l.Token), resp)
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

// completeOrAbort is complete as a statement that fails when the lock
// token no longer holds the key: a division by zero, SQLSTATE 22012, which
// nothing else in it can raise. The failure aborts the transaction, so a
// COMMIT sent behind it in the same round trip does not run.
const completeOrAbort = `
WITH completed AS (` + pgsql.Complete + `
 RETURNING 1)
SELECT 1 / count(*) FROM completed`

const codeDivisionByZero = "22012"

func (k keys) Fail(ctx context.Context, l store.Attempt) error {
	return k.fenced(ctx, "fail", k.sql.fail, l.Scope, l.Key, l.Token)
}

func (k keys) Renew(ctx context.Context, l store.Attempt, d time.Duration) error {
	return k.fenced(ctx, "renew", k.sql.renew, l.Scope, l.Key, l.Token, d.Microseconds())
}

// fenced runs an update that must match the row its fencing token holds;
// matching none means another attempt holds it now.
func (k keys) fenced(ctx context.Context, op, sql string, args ...any) error {
	tag, err := k.db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, translate(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotHeld)
	}
	return nil
}

// bounded runs a statement that may wait on a row another transaction
// holds, with lock_timeout set to lockWait for that statement alone: the
// three statements go in one batch (one round trip), and the handler's own
// statements get the session's setting back. Outside a request's
// transaction the statement's own transaction ends the setting: nothing to
// restore.
func (k keys) bounded(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	_, own := k.db.(autocommit)
	b := &pgx.Batch{}
	b.Queue(setLockWait(k.lockWait))
	b.Queue(sql, args...)
	if !own {
		b.Queue(restoreLockWait)
	}
	br := k.db.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return pgconn.CommandTag{}, translate(err)
	}
	tag, err := br.Exec()
	if err != nil {
		return tag, translate(err)
	}
	if !own {
		if _, err := br.Exec(); err != nil {
			return tag, translate(err)
		}
	}
	return tag, translate(br.Close())
}
