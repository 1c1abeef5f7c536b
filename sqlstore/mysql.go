package sqlstore

import (
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
)

// notAwaitingOperator is keytable.NotAwaitingOperator in MySQL, which
// compares a binary column with a string byte by byte.
var notAwaitingOperator = keytable.NotAwaitingOperator(func(haystack, needle string) string {
	return "LOCATE(" + needle + ", " + haystack + ") > 0"
})

// mysqlStatements are the store's statements for MySQL and MariaDB
// (InnoDB). Times are DATETIME(6) in UTC from UTC_TIMESTAMP(6), which is
// constant within a statement, as PostgreSQL's now() is within a
// transaction. Placeholders are positional, so each statement lists the
// order of its canonical arguments.
func mysqlStatements(table string) engine.Statements {
	const now = `UTC_TIMESTAMP(6)`
	columns := `request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token, claimed_at, lease_expires_at,
       lease_expires_at > ` + now + `,
       response_code, response_headers, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= ` + now + ` AND ` + finished + ` AND ` + notAwaitingOperator + `,
       COALESCE(recovery_point, ''), completed_at`
	record := `
SELECT ` + columns + `
  FROM idempotency_keys
 WHERE scope = ? AND idempotency_key = ?`
	// The claim is one insert; on a recorded key the no-op update changes
	// nothing, so the driver reports 0 rows (1 for an insert). Unlike
	// INSERT IGNORE it turns no other error into a warning.
	const insert = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?,
        'PROCESSING', 1, ?, ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND, ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE scope = scope`
	const insertCompleted = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at, completed_at,
        response_code, response_headers, response_body, resource_type, resource_id)
VALUES (?, ?, ?, ?, ?, ?,
        'COMPLETED', 1, ?, ` + now + `, ` + now + `, ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND, ` + now + `,
        ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''))`
	// MySQL assigns left to right, each assignment seeing the ones before:
	// attempts and created_at read expires_at, the recovery point and the
	// status before they change, and so does recovery_point the status.
	reacquire := `
UPDATE idempotency_keys
   SET attempts   = IF(expires_at <= ` + now + ` AND ` + finished + `, 1, attempts + 1),
       created_at = IF(expires_at <= ` + now + ` AND ` + finished + `, ` + now + `, created_at),
       recovery_point = IF(status = 'COMPLETED', NULL, recovery_point),
       provider_keys  = IF(status = 'COMPLETED', NULL, provider_keys),
       expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND),
       request_method = ?, request_path = ?, request_hash = ?, fingerprint_version = ?,
       status = 'PROCESSING',
       fencing_token = ?, claimed_at = ` + now + `, lease_expires_at = ` + now + ` + INTERVAL ? MICROSECOND,
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL, completed_at = NULL
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ?
   AND (status = 'FAILED'
        OR (status = 'PROCESSING' AND lease_expires_at <= ` + now + `)
        OR (status = 'COMPLETED' AND expires_at <= ` + now + ` AND ` + notAwaitingOperator + `))`
	const complete = `
UPDATE idempotency_keys
   SET status = 'COMPLETED', lease_expires_at = ` + now + `, completed_at = ` + now + `,
       response_code = ?, response_headers = ?, response_body = ?,
       resource_type = NULLIF(?, ''), resource_id = NULLIF(?, '')
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'PROCESSING'`
	const fail = `
UPDATE idempotency_keys
   SET status = 'FAILED', lease_expires_at = ` + now + `
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'PROCESSING'`
	const renew = `
UPDATE idempotency_keys
   SET lease_expires_at = ` + now + ` + INTERVAL ? MICROSECOND
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'PROCESSING'`
	const holds = `
SELECT COUNT(*) FROM idempotency_keys
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'PROCESSING'`
	// A named lock per database and key table; names are at most 64
	// characters, hence the hash.
	const lockName = `CONCAT('idem.sweep.', SHA1(CONCAT(DATABASE(), '.idempotency_keys')))`
	sweepSelect := `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE expires_at <= ` + now + `
   AND (status <> 'PROCESSING' OR lease_expires_at <= ` + now + `)
   AND ` + finished + `
   AND ` + notAwaitingOperator + `
 ORDER BY expires_at
 LIMIT ?
   FOR UPDATE SKIP LOCKED`
	const phase = `
SELECT COALESCE(recovery_point, ''), created_at, provider_keys
  FROM idempotency_keys
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'PROCESSING'`
	// JSON_MERGE_PATCH keeps its second argument's value of a key both
	// have: a recorded provider key is never replaced.
	const advance = `
UPDATE idempotency_keys
   SET recovery_point = ?,
       provider_keys = IF(? IS NULL, provider_keys, JSON_MERGE_PATCH(?, COALESCE(provider_keys, '{}')))
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'PROCESSING'`
	// unfinished_at is claimed_at on an unfinished row, else NULL: an index
	// of the rows the completer looks for, where InnoDB has no partial one.
	const findUnfinished = `
SELECT scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
       recovery_point, fencing_token
  FROM idempotency_keys
 WHERE unfinished_at IS NOT NULL
   AND (status = 'FAILED' OR lease_expires_at <= ` + now + `)
 ORDER BY unfinished_at
 LIMIT ?`
	// The completer's take-over: fenced by the listed token and by the
	// record still being abandoned and unfinished; fingerprint and life
	// kept. The WHERE clause reads the row before the assignments.
	const resumeUnfinished = `
UPDATE idempotency_keys
   SET status = 'PROCESSING', attempts = attempts + 1,
       expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND),
       fencing_token = ?, claimed_at = ` + now + `, lease_expires_at = ` + now + ` + INTERVAL ? MICROSECOND
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ?
   AND recovery_point IS NOT NULL
   AND (status = 'FAILED' OR (status = 'PROCESSING' AND lease_expires_at <= ` + now + `))`
	const listCompleted = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE status = 'COMPLETED' AND response_code = ?
   AND (scope, idempotency_key) > (?, ?)
 ORDER BY scope, idempotency_key
 LIMIT ?`
	const release = `
UPDATE idempotency_keys
   SET status = 'FAILED',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL, completed_at = NULL
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'COMPLETED'`
	const replaceResponse = `
UPDATE idempotency_keys
   SET expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL TIMESTAMPDIFF(MICROSECOND, claimed_at, expires_at) MICROSECOND),
       response_code = ?, response_headers = ?, response_body = ?,
       resource_type = NULLIF(?, ''), resource_id = NULLIF(?, ''), completed_at = ` + now + `
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'COMPLETED'`
	const holdsCompleted = `
SELECT COUNT(*) FROM idempotency_keys
 WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND status = 'COMPLETED'`
	// InnoDB's index of unfinished rows is unfinished_at's.
	const countUnfinished = `
SELECT recovery_point, COUNT(*), MIN(claimed_at) FROM idempotency_keys
 WHERE unfinished_at IS NOT NULL GROUP BY recovery_point`
	const appendAudit = `
INSERT INTO idempotency_keys_audit (at, actor, action, reason, scope, idempotency_key, ` + "`before`, `after`" + `)
VALUES (` + now + `, ?, ?, ?, ?, ?, ?, ?)`
	const listAudit = `
SELECT at, actor, action, reason, scope, idempotency_key, ` + "`before`, `after`" + `
  FROM idempotency_keys_audit
 WHERE ? = '' OR (scope = ? AND idempotency_key = ?)
 ORDER BY id DESC LIMIT ?`
	return engine.Statements{
		Search: keytable.Dialect{
			Arg:  func(n int) string { return "$" + strconv.Itoa(n) }, // made positional by ListKeys
			Time: func(t time.Time) any { return t.UTC() },
			// Once: LOCATE, not a substring the length of the argument.
			// The column's binary collation makes it exact.
			PathPrefix: func(arg string) string { return "LOCATE(" + arg + ", request_path) = 1" },
		},
		ListCompleted:    stmt(listCompleted, table),
		Release:          stmt(release, table),
		ReplaceResponse:  ordered(replaceResponse, table, 3, 4, 5, 6, 7, 0, 1, 2),
		HoldsCompleted:   stmt(holdsCompleted, table),
		Now:              `SELECT ` + now,
		CountByStatus:    withTable(countByStatus, table),
		CountUnfinished:  withTable(countUnfinished, table),
		ProviderKeys:     stmt(`SELECT provider_keys FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?`, table),
		AppendAudit:      stmt(appendAudit, table),
		ListAudit:        ordered(listAudit, table, 0, 0, 1, 2),
		Columns:          columns,
		Get:              stmt(record, table),
		Insert:           stmt(insert, table),
		InsertCompleted:  stmt(insertCompleted, table),
		Reacquire:        ordered(reacquire, table, 8, 2, 3, 4, 5, 6, 7, 0, 1, 9),
		Complete:         ordered(complete, table, 3, 4, 5, 6, 7, 0, 1, 2),
		Fail:             stmt(fail, table),
		Renew:            ordered(renew, table, 3, 0, 1, 2),
		Holds:            stmt(holds, table),
		Phase:            stmt(phase, table),
		Advance:          ordered(advance, table, 3, 4, 4, 0, 1, 2),
		FindUnfinished:   stmt(findUnfinished, table),
		ResumeUnfinished: ordered(resumeUnfinished, table, 4, 2, 3, 0, 1, 5),
		SweepLock:        withTable(`SELECT GET_LOCK(`+lockName+`, 0) = 1`, table),
		SweepUnlock:      withTable(`DO RELEASE_LOCK(`+lockName+`)`, table),
		SweepSelect:      stmt(sweepSelect, table),
		SweepDelete:      withTable(`DELETE FROM idempotency_keys WHERE `, table),
	}
}
