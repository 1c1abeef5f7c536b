// Package pgsql holds the key table's PostgreSQL statements that pgstore
// (pgx) and sqlstore's PostgreSQL dialect (database/sql) both run, written
// once for the default table (keytable.Rewrite puts in another). A change
// of the protocol lands in both stores at once.
package pgsql

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
)

// InsertClaim claims a key in one insert; a recorded key inserts nothing.
const InsertClaim = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6,
        'PROCESSING', 1, $7, now(), now() + $8 * interval '1 microsecond', now(), now() + $9 * interval '1 microsecond')
ON CONFLICT (scope, idempotency_key) DO NOTHING`

// InsertCompleted claims a key and completes it in one insert: the
// record is born COMPLETED with its response (the deferred claim). On a
// recorded key it fails, or, with ON CONFLICT added, inserts nothing.
const InsertCompleted = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at, completed_at,
        response_code, response_headers, response_body, resource_type, resource_id)
VALUES ($1, $2, $3, $4, $5, $6,
        'COMPLETED', 1, $7, now(), now(), now(), now() + $8 * interval '1 microsecond', now(),
        $9, $10::text::jsonb, $11, nullif($12, ''), nullif($13, ''))`

// Reacquire takes over a re-acquirable row that prevToken still holds. The
// token in the WHERE clause makes it a compare-and-swap: once one contender
// has changed the token, every other one matches no row. A finished row
// past retention starts a new life: new fingerprint, creation, expiry and
// no recovery point nor provider keys. An unfinished one is resumed in its
// life, recovery point and provider keys kept (model/payout.pml: a re-acquire of
// UNKNOWN never starts a new life). A record holding the outcome-unknown
// answer is never re-acquired: only an operator settles it.
//
// The CASEs read the time from clock, not from now(): Citus refuses a
// modification whose CASE calls a function that is not immutable, and
// evaluates clock on the coordinator, as it does the other now()s.
var Reacquire = `
UPDATE idempotency_keys
   SET request_method = $3, request_path = $4, request_hash = $5, fingerprint_version = $6,
       status = 'PROCESSING',
       attempts   = CASE WHEN expires_at <= clock.now AND ` + keytable.Finished + ` THEN 1 ELSE attempts + 1 END,
       created_at = CASE WHEN expires_at <= clock.now AND ` + keytable.Finished + ` THEN clock.now ELSE created_at END,
       recovery_point = CASE WHEN status = 'COMPLETED' THEN NULL ELSE recovery_point END,
       provider_keys  = CASE WHEN status = 'COMPLETED' THEN NULL ELSE provider_keys END,
       expires_at = GREATEST(expires_at, now() + $9 * interval '1 microsecond'),
       fencing_token = $7, claimed_at = now(), lease_expires_at = now() + $8 * interval '1 microsecond',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL, completed_at = NULL
  FROM (SELECT now() AS now) AS clock
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $10
   AND (status = 'FAILED'
        OR (status = 'PROCESSING' AND lease_expires_at <= now())
        OR (status = 'COMPLETED' AND expires_at <= now() AND ` + NotAwaitingOperator + `))`

// Complete is pgstore's and sqlstore's PostgreSQL statement.
const Complete = `
UPDATE idempotency_keys
   SET status = 'COMPLETED', lease_expires_at = now(), completed_at = now(),
       response_code = $4, response_headers = $5::text::jsonb, response_body = $6,
       resource_type = nullif($7, ''), resource_id = nullif($8, '')
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'PROCESSING'`

// Fail is pgstore's and sqlstore's PostgreSQL statement.
const Fail = `
UPDATE idempotency_keys
   SET status = 'FAILED', lease_expires_at = now()
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'PROCESSING'`

// Renew is pgstore's and sqlstore's PostgreSQL statement.
const Renew = `
UPDATE idempotency_keys
   SET lease_expires_at = now() + $4 * interval '1 microsecond'
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'PROCESSING'`

// SelectPhase reads the recovery point and the life together, fenced by
// the token: model/payout.pml's fenced read (rule 5 of docs/model.md).
const SelectPhase = `
SELECT coalesce(recovery_point, ''), created_at, provider_keys::text
  FROM idempotency_keys
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'PROCESSING'`

// Advance merges the new provider keys under the recorded ones: jsonb's
// || keeps its right operand's value of a key both have.
const Advance = `
UPDATE idempotency_keys
   SET recovery_point = $4,
       provider_keys = CASE WHEN $5::text IS NULL THEN provider_keys
                            ELSE $5::text::jsonb || coalesce(provider_keys, '{}'::jsonb) END
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'PROCESSING'`

// FindUnfinished reads the partial index idempotency_keys_unfinished_idx.
const FindUnfinished = `
SELECT scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
       recovery_point, fencing_token::text
  FROM idempotency_keys
 WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED'
   AND (status = 'FAILED' OR lease_expires_at <= now())
 ORDER BY claimed_at
 LIMIT $1`

// ResumeUnfinished is Reacquire for the completer: fenced by the listed
// token and by the record still being abandoned and unfinished, it keeps
// the record's fingerprint and life (model/payout.pml's Completer).
const ResumeUnfinished = `
UPDATE idempotency_keys
   SET status = 'PROCESSING', attempts = attempts + 1,
       expires_at = GREATEST(expires_at, now() + $5 * interval '1 microsecond'),
       fencing_token = $3, claimed_at = now(), lease_expires_at = now() + $4 * interval '1 microsecond'
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $6
   AND recovery_point IS NOT NULL
   AND (status = 'FAILED' OR (status = 'PROCESSING' AND lease_expires_at <= now()))`

// ListCompleted lists the keys of COMPLETED records answered $1
// (store.Capabilities.Resolve): it walks the primary key in order from
// after, filtering: an operator's scan, stopped at the limit.
const ListCompleted = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE status = 'COMPLETED' AND response_code = $1
   AND (scope, idempotency_key) > ($2, $3)
 ORDER BY scope, idempotency_key
 LIMIT $4`

// Release reopens the COMPLETED record the token $3 holds: FAILED, its
// response dropped (store.Capabilities.Resolve).
const Release = `
UPDATE idempotency_keys
   SET status = 'FAILED',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL, completed_at = NULL
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'COMPLETED'`

// ReplaceResponse replaces the response of the COMPLETED record the token
// $3 holds (store.Capabilities.Resolve), and binds its key for the record's
// retention again, from now: an answer recorded past it is still replayed.
// The sum is in UTC timestamps: Citus refuses a function that is not
// immutable, such as timestamptz + interval, on a column in an UPDATE.
const ReplaceResponse = `
UPDATE idempotency_keys
   SET response_code = $4, response_headers = $5::text::jsonb, response_body = $6,
       resource_type = nullif($7, ''), resource_id = nullif($8, ''), completed_at = now(),
       expires_at = GREATEST(expires_at, ((now() AT TIME ZONE 'UTC')
                    + ((expires_at AT TIME ZONE 'UTC') - (claimed_at AT TIME ZONE 'UTC'))) AT TIME ZONE 'UTC')
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'COMPLETED'`

// AppendAudit records an operator's action (store.Capabilities.AuditLog).
const AppendAudit = `
INSERT INTO idempotency_keys_audit (actor, action, reason, scope, idempotency_key, before, after)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

// ListAudit reads the latest operator actions, of one key or all
// (store.Capabilities.AuditLog).
const ListAudit = `
SELECT at, actor, action, reason, scope, idempotency_key, before, after
  FROM idempotency_keys_audit
 WHERE $1 = '' OR (scope = $1 AND idempotency_key = $2)
 ORDER BY id DESC LIMIT $3`

// NotAwaitingOperator is keytable.NotAwaitingOperator in PostgreSQL: a row
// that does not hold the outcome-unknown answer an operator must settle.
// The needle, ASCII without a backslash, is a bytea constant: Citus
// refuses a modification whose COALESCE holds a function that is not
// immutable, as convert_to is (the re-acquire, a sweep on a distributed
// key table).
var NotAwaitingOperator = keytable.NotAwaitingOperator(func(haystack, needle string) string {
	return "position(" + needle + "::bytea IN " + haystack + ") > 0"
})

// LockWait bounds the transaction's waits for locks to wait, at least a
// millisecond: a claim's bound. RestoreLockWait ends it inside a request's
// transaction: the handler's statements after it wait as long as the
// session's default says (the server's, the role's or the connection
// string's). SET LOCAL, unlike set_config, is what Citus passes on to the
// workers that hold the rows (citus.propagate_set_commands = 'local').
func LockWait(wait time.Duration) string {
	ms := max(wait.Milliseconds(), 1)
	if last := lastLockWait.Load(); last != nil && last.ms == ms {
		return last.sql // a store's waits are all alike: one string, made once
	}
	s := "SET LOCAL lock_timeout = '" + strconv.FormatInt(ms, 10) + "ms'"
	lastLockWait.Store(&lockWaitSQL{ms: ms, sql: s})
	return s
}

// RestoreLockWait: see LockWait.
const RestoreLockWait = `SET LOCAL lock_timeout TO DEFAULT`

// lockWaitSQL is a statement of LockWait, for a wait in milliseconds.
type lockWaitSQL struct {
	ms  int64
	sql string
}

// lastLockWait is the statement LockWait made last.
var lastLockWait atomic.Pointer[lockWaitSQL]

// Classify names the kind of a PostgreSQL error by its SQLSTATE code.
func Classify(code string) engine.ErrKind {
	switch code {
	case "55P03": // lock_not_available: lock_timeout fired
		return engine.ErrLockTimeout
	case "40P01": // deadlock_detected
		return engine.ErrDeadlock
	case "23505": // unique_violation
		return engine.ErrDuplicate
	case "25P02": // in_failed_sql_transaction
		return engine.ErrInFailedTx
	}
	return engine.ErrOther
}
