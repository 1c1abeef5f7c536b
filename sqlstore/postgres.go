package sqlstore

import "github.com/idem-dev/idem/idemshared/keytable/pgsql"

// postgresStatements are pgstore's statements, on database/sql.
func postgresStatements(table string) statements {
	const record = `
SELECT request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token::text, claimed_at, lease_expires_at,
       lease_expires_at > now(),
       response_code, response_headers::text, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= now() AND ` + finished + `,
       coalesce(recovery_point, '')
  FROM idempotency_keys
 WHERE scope = $1 AND idempotency_key = $2`
	// A plain INSERT: on a recorded key it fails, which aborts the
	// transaction with everything the handler wrote.
	const insertCompleted = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at,
        response_code, response_headers, response_body, resource_type, resource_id)
VALUES ($1, $2, $3, $4, $5, $6,
        'COMPLETED', 1, $7, now(), now(), now(), now() + $8 * interval '1 microsecond',
        $9, $10::text::jsonb, $11, nullif($12, ''), nullif($13, ''))`
	// A transaction-scoped advisory lock per key table (its oid tells
	// schemas apart); the same statement bounds the wait for the table's
	// lock, so a sweep queued behind a migration gives up.
	const sweepLock = `
SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text))
  FROM set_config('lock_timeout', '2s', true)`
	const sweepSelect = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE expires_at <= now()
   AND (status <> 'PROCESSING' OR lease_expires_at <= now())
   AND ` + finished + `
 ORDER BY expires_at
 LIMIT $1
   FOR UPDATE SKIP LOCKED`
	return statements{
		get:              stmt{sql: withTable(record, table)},
		insert:           stmt{sql: withTable(pgsql.InsertClaim, table)},
		insertCompleted:  stmt{sql: withTable(insertCompleted, table)},
		reacquire:        stmt{sql: withTable(pgsql.Reacquire, table)},
		complete:         stmt{sql: withTable(pgsql.Complete, table)},
		fail:             stmt{sql: withTable(pgsql.Fail, table)},
		renew:            stmt{sql: withTable(pgsql.Renew, table)},
		phase:            stmt{sql: withTable(pgsql.SelectPhase, table)},
		advance:          stmt{sql: withTable(pgsql.Advance, table)},
		findUnfinished:   stmt{sql: withTable(pgsql.FindUnfinished, table)},
		resumeUnfinished: stmt{sql: withTable(pgsql.ResumeUnfinished, table)},
		sweepLock:        withTable(sweepLock, table),
		sweepSelect:      stmt{sql: withTable(sweepSelect, table)},
		sweepDelete:      withTable(`DELETE FROM idempotency_keys WHERE `, table),
	}
}
