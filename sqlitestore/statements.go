package sqlitestore

import (
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
)

// dialect is SQLite's, on modernc.org/sqlite. The table keeps times as
// microseconds since the Unix epoch, read off this host's clock: SQLite's
// own is the second's, and the store takes one reading per operation,
// once it holds the write lock. Its statements name their parameters,
// that reading as :now; the SQL mirrors pgstore's statement by statement.
var dialect = engine.Dialect{
	Name:        "sqlite",
	Statements:  statements,
	Translate:   translate,
	Placeholder: func(n int) string { return "?" + strconv.Itoa(n) },
	Now:         func(t time.Time) any { return t.UnixMicro() },
}

// statements are the store's SQL on its key table. The constants are
// written for the default table, and rewritten once, when the store is
// made.
func statements(table string) engine.Statements {
	named := func(sql string, names ...string) engine.Stmt {
		return engine.Stmt{SQL: keytable.Rewrite(sql, table), Names: names}
	}
	positional := func(sql string, order ...int) engine.Stmt {
		return engine.Stmt{SQL: keytable.Rewrite(sql, table), Order: order}
	}
	claim := []string{"scope", "key", "method", "path", "hash", "version", "token", "lock_for", "ttl"}
	response := []string{"scope", "key", "token", "code", "headers", "body", "resource_type", "resource_id"}
	held := []string{"scope", "key", "token"}
	return engine.Statements{
		Get:              named(selectRecord, "scope", "key"),
		Insert:           named(insertClaim, claim...),
		Reacquire:        named(reacquire, append(claim, "prev_token")...),
		Complete:         named(complete, response...),
		Fail:             named(fail, held...),
		Renew:            named(renew, "scope", "key", "token", "lock_for"),
		Phase:            named(selectPhase, held...),
		Advance:          named(advance, "scope", "key", "token", "point", "provider_keys"),
		FindUnfinished:   named(findUnfinished, "limit"),
		ResumeUnfinished: named(resumeUnfinished, "scope", "key", "token", "lock_for", "ttl", "prev_token"),
		DeleteExpired:    named(deleteExpired, "limit"),
		// The store's clock is the search's first argument.
		Columns: strings.ReplaceAll(recordColumns, ":now", "?1"),
		Search: keytable.Dialect{
			Arg:  func(n int) string { return "?" + strconv.Itoa(n) },
			Time: func(t time.Time) any { return t.UnixMicro() },
		},
		ListCompleted:   named(listCompleted, "code", "scope", "key", "limit"),
		Release:         named(release, held...),
		ReplaceResponse: named(replaceResponse, response...),
		CountByStatus:   keytable.Rewrite(countByStatus, table),
		CountUnfinished: keytable.Rewrite(countUnfinished, table),
		ProviderKeys:    positional(selectProviderKeys),
		// at (the store's clock), actor, action, reason, scope, key, before, after
		AppendAudit: positional(appendAudit, -1, 0, 1, 2, 3, 4, 5, 6),
		ListAudit:   positional(listAudit),
	}
}

// finished is true of a row that is not unfinished (keytable.Finished).
const finished = keytable.Finished

// recordColumns are a record's columns as scanRecord reads them.
var recordColumns = `request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token, claimed_at, lease_expires_at,
       lease_expires_at > :now,
       response_code, response_headers, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= :now AND ` + finished + ` AND ` + notAwaitingOperator + `,
       coalesce(recovery_point, ''), completed_at`

var selectRecord = `
SELECT ` + recordColumns + `
  FROM idempotency_keys
 WHERE scope = :scope AND idempotency_key = :key`

const insertClaim = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at)
VALUES (:scope, :key, :method, :path, :hash, :version,
        'PROCESSING', 1, :token, :now, :now + :lock_for, :now, :now + :ttl)
ON CONFLICT (scope, idempotency_key) DO NOTHING`

// reacquire takes over a re-acquirable row that prevToken still holds. The
// token in the WHERE clause makes it a compare-and-swap: once one contender
// has changed the token, every other one matches no row. A row past
// retention starts a new life: new fingerprint, creation and expiry, unless
// it is unfinished (store.Keys.Advance), which resumes in its life. As in
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
       resource_type = NULL, resource_id = NULL, completed_at = NULL
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :prev_token
   AND (status = 'FAILED'
        OR (status = 'PROCESSING' AND lease_expires_at <= :now)
        OR (status = 'COMPLETED' AND expires_at <= :now AND ` + notAwaitingOperator + `))`

const complete = `
UPDATE idempotency_keys
   SET status = 'COMPLETED', lease_expires_at = :now, completed_at = :now,
       response_code = :code, response_headers = :headers, response_body = :body,
       resource_type = nullif(:resource_type, ''), resource_id = nullif(:resource_id, '')
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

const fail = `
UPDATE idempotency_keys
   SET status = 'FAILED', lease_expires_at = :now
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

const renew = `
UPDATE idempotency_keys
   SET lease_expires_at = :now + :lock_for
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

// selectPhase reads the recovery point and the life together, fenced by
// the token: model/payout.pml's fenced read (rule 5 of docs/model.md).
const selectPhase = `
SELECT coalesce(recovery_point, ''), created_at, provider_keys
  FROM idempotency_keys
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

// advance merges the new provider keys under the recorded ones:
// json_patch keeps its second operand's value of a key both have.
const advance = `
UPDATE idempotency_keys
   SET recovery_point = :point,
       provider_keys = CASE WHEN :provider_keys IS NULL THEN provider_keys
                            ELSE json_patch(:provider_keys, coalesce(provider_keys, '{}')) END
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

// findUnfinished reads the partial index idempotency_keys_unfinished_idx.
const findUnfinished = `
SELECT scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
       recovery_point, fencing_token
  FROM idempotency_keys
 WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED'
   AND (status = 'FAILED' OR lease_expires_at <= :now)
 ORDER BY claimed_at
 LIMIT :limit`

// resumeUnfinished is reacquire for the completer: fenced by the listed
// token and by the record still being abandoned and unfinished, it keeps
// the record's fingerprint and life (model/payout.pml's Completer).
const resumeUnfinished = `
UPDATE idempotency_keys
   SET status = 'PROCESSING', attempts = attempts + 1,
       expires_at = MAX(expires_at, :now + :ttl),
       fencing_token = :token, claimed_at = :now, lease_expires_at = :now + :lock_for
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :prev_token
   AND recovery_point IS NOT NULL
   AND (status = 'FAILED' OR (status = 'PROCESSING' AND lease_expires_at <= :now))`

// listCompleted walks the primary key in order from after, filtering: an
// operator's scan, stopped at the limit.
const listCompleted = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE status = 'COMPLETED' AND response_code = :code
   AND (scope, idempotency_key) > (:scope, :key)
 ORDER BY scope, idempotency_key
 LIMIT :limit`

const release = `
UPDATE idempotency_keys
   SET status = 'FAILED',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL, completed_at = NULL
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'COMPLETED'`

const replaceResponse = `
UPDATE idempotency_keys
   SET response_code = :code, response_headers = :headers, response_body = :body,
       resource_type = nullif(:resource_type, ''), resource_id = nullif(:resource_id, ''), completed_at = :now,
       expires_at = MAX(expires_at, :now + (expires_at - claimed_at))
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'COMPLETED'`

const countByStatus = `
SELECT status, count(*), min(created_at) FROM idempotency_keys GROUP BY status`

const countUnfinished = `
SELECT recovery_point, count(*), min(claimed_at) FROM idempotency_keys
 WHERE ` + keytable.Unfinished + ` GROUP BY recovery_point`

const selectProviderKeys = `
SELECT provider_keys FROM idempotency_keys WHERE scope = ?1 AND idempotency_key = ?2`

const appendAudit = `
INSERT INTO idempotency_keys_audit (at, actor, action, reason, scope, idempotency_key, before, after)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`

const listAudit = `
SELECT at, actor, action, reason, scope, idempotency_key, before, after
  FROM idempotency_keys_audit
 WHERE ?1 = '' OR (scope = ?1 AND idempotency_key = ?2)
 ORDER BY id DESC LIMIT ?3`

// notAwaitingOperator is keytable.NotAwaitingOperator in SQLite.
var notAwaitingOperator = keytable.NotAwaitingOperator(func(haystack, needle string) string {
	return "instr(" + haystack + ", CAST(" + needle + " AS BLOB)) > 0"
})

// deleteExpired deletes the oldest expired rows through the expires_at
// index, at most :limit, but not a claim whose lock is live nor an
// unfinished record (store.Keys.Advance), nor one holding the outcome-unknown
// answer (store.AwaitsOperator).
var deleteExpired = `
DELETE FROM idempotency_keys
 WHERE rowid IN (SELECT rowid FROM idempotency_keys
                  WHERE expires_at <= :now
                    AND (status <> 'PROCESSING' OR lease_expires_at <= :now)
                    AND ` + finished + `
                    AND ` + notAwaitingOperator + `
                  ORDER BY expires_at
                  LIMIT :limit)
RETURNING scope, idempotency_key`
