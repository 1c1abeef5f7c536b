package sqlstore

// postgresStatements are pgstore's statements, on database/sql.
func postgresStatements(table string) statements {
	const record = `
SELECT request_method, request_path, request_hash, fingerprint_version,
       status, attempts, lock_token::text, locked_at, lock_expires_at,
       lock_expires_at > now(),
       response_code, response_headers::text, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= now() AND ` + finished + `,
       coalesce(recovery_point, '')
  FROM idempotency_keys
 WHERE user_id = $1 AND idempotency_key = $2`
	const insert = `
INSERT INTO idempotency_keys
       (user_id, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, lock_token, locked_at, lock_expires_at, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6,
        'PROCESSING', 1, $7, now(), now() + $8 * interval '1 microsecond', now(), now() + $9 * interval '1 microsecond')
ON CONFLICT (user_id, idempotency_key) DO NOTHING`
	// A plain INSERT: on a recorded key it fails, which aborts the
	// transaction with everything the handler wrote.
	const insertCompleted = `
INSERT INTO idempotency_keys
       (user_id, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, lock_token, locked_at, lock_expires_at, created_at, expires_at,
        response_code, response_headers, response_body, resource_type, resource_id)
VALUES ($1, $2, $3, $4, $5, $6,
        'COMPLETED', 1, $7, now(), now(), now(), now() + $8 * interval '1 microsecond',
        $9, $10::text::jsonb, $11, nullif($12, ''), nullif($13, ''))`
	const reacquire = `
UPDATE idempotency_keys
   SET request_method = $3, request_path = $4, request_hash = $5, fingerprint_version = $6,
       status = 'PROCESSING',
       attempts   = CASE WHEN expires_at <= now() AND ` + finished + ` THEN 1 ELSE attempts + 1 END,
       created_at = CASE WHEN expires_at <= now() AND ` + finished + ` THEN now() ELSE created_at END,
       recovery_point = CASE WHEN status = 'COMPLETED' THEN NULL ELSE recovery_point END,
       provider_keys  = CASE WHEN status = 'COMPLETED' THEN NULL ELSE provider_keys END,
       expires_at = GREATEST(expires_at, now() + $9 * interval '1 microsecond'),
       lock_token = $7, locked_at = now(), lock_expires_at = now() + $8 * interval '1 microsecond',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $10
   AND (status = 'FAILED'
        OR (status = 'PROCESSING' AND lock_expires_at <= now())
        OR (status = 'COMPLETED' AND expires_at <= now()))`
	const complete = `
UPDATE idempotency_keys
   SET status = 'COMPLETED', lock_expires_at = now(),
       response_code = $4, response_headers = $5::text::jsonb, response_body = $6,
       resource_type = nullif($7, ''), resource_id = nullif($8, '')
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`
	const fail = `
UPDATE idempotency_keys
   SET status = 'FAILED', lock_expires_at = now()
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`
	const renew = `
UPDATE idempotency_keys
   SET lock_expires_at = now() + $4 * interval '1 microsecond'
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`
	// A transaction-scoped advisory lock per key table (its oid tells
	// schemas apart); the same statement bounds the wait for the table's
	// lock, so a sweep queued behind a migration gives up.
	const sweepLock = `
SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text))
  FROM set_config('lock_timeout', '2s', true)`
	const sweepSelect = `
SELECT user_id, idempotency_key FROM idempotency_keys
 WHERE expires_at <= now()
   AND (status <> 'PROCESSING' OR lock_expires_at <= now())
   AND ` + finished + `
 ORDER BY expires_at
 LIMIT $1
   FOR UPDATE SKIP LOCKED`
	const phase = `
SELECT coalesce(recovery_point, ''), created_at, provider_keys::text
  FROM idempotency_keys
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`
	const advance = `
UPDATE idempotency_keys
   SET recovery_point = $4,
       provider_keys = CASE WHEN $5::text IS NULL THEN provider_keys
                            ELSE $5::text::jsonb || coalesce(provider_keys, '{}'::jsonb) END
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`
	// Reads the partial index idempotency_keys_unfinished_idx.
	const findUnfinished = `
SELECT user_id, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
       recovery_point, lock_token::text
  FROM idempotency_keys
 WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED'
   AND (status = 'FAILED' OR lock_expires_at <= now())
 ORDER BY locked_at
 LIMIT $1`
	// The completer's take-over: fenced by the listed token and by the
	// record still being abandoned and unfinished; fingerprint and life kept.
	const resumeUnfinished = `
UPDATE idempotency_keys
   SET status = 'PROCESSING', attempts = attempts + 1,
       expires_at = GREATEST(expires_at, now() + $5 * interval '1 microsecond'),
       lock_token = $3, locked_at = now(), lock_expires_at = now() + $4 * interval '1 microsecond'
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $6
   AND recovery_point IS NOT NULL
   AND (status = 'FAILED' OR (status = 'PROCESSING' AND lock_expires_at <= now()))`
	return statements{
		get:              stmt{sql: withTable(record, table)},
		insert:           stmt{sql: withTable(insert, table)},
		insertCompleted:  stmt{sql: withTable(insertCompleted, table)},
		reacquire:        stmt{sql: withTable(reacquire, table)},
		complete:         stmt{sql: withTable(complete, table)},
		fail:             stmt{sql: withTable(fail, table)},
		renew:            stmt{sql: withTable(renew, table)},
		phase:            stmt{sql: withTable(phase, table)},
		advance:          stmt{sql: withTable(advance, table)},
		findUnfinished:   stmt{sql: withTable(findUnfinished, table)},
		resumeUnfinished: stmt{sql: withTable(resumeUnfinished, table)},
		sweepLock:        withTable(sweepLock, table),
		sweepSelect:      stmt{sql: withTable(sweepSelect, table)},
		sweepDelete:      withTable(`DELETE FROM idempotency_keys WHERE `, table),
	}
}
