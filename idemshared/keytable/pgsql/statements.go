package pgsql

import (
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
)

// Statements are the engine's statements in PostgreSQL on table, for
// pgstore (pgx) and sqlstore's PostgreSQL dialect (database/sql) alike.
func Statements(table string) engine.Statements {
	s := func(sql string) engine.Stmt { return engine.Stmt{SQL: keytable.Rewrite(sql, table)} }
	r := func(sql string) string { return keytable.Rewrite(sql, table) }
	return engine.Statements{
		Search:          keytable.Dialect{Arg: Placeholder, Time: func(t time.Time) any { return t }},
		ListCompleted:   s(ListCompleted),
		Release:         s(Release),
		ReplaceResponse: s(ReplaceResponse),
		Now:             `SELECT now()`,
		CountByStatus:   r(countByStatus),
		CountUnfinished: r(CountUnfinished),
		ProviderKeys:    s(`SELECT provider_keys::text FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2`),
		AppendAudit:     s(AppendAudit),
		ListAudit:       s(ListAudit),
		Columns:         recordColumns,
		Get:             s(selectRecord),
		Insert:          s(InsertClaim),
		// A plain INSERT: on a recorded key it fails, which aborts the
		// transaction with everything the handler wrote.
		InsertCompleted:  s(InsertCompleted),
		Reacquire:        s(Reacquire),
		Complete:         s(Complete),
		Fail:             s(Fail),
		Renew:            s(Renew),
		Phase:            s(SelectPhase),
		Advance:          s(Advance),
		FindUnfinished:   s(FindUnfinished),
		ResumeUnfinished: s(ResumeUnfinished),
		SweepLock:        r(sweepLock),
		SweepSelect:      s(sweepSelect),
		SweepDelete:      r(`DELETE FROM idempotency_keys WHERE `),
	}
}

// Placeholder is the n-th (1-based) parameter's placeholder, $n.
func Placeholder(n int) string { return "$" + strconv.Itoa(n) }

// recordColumns are a record's columns as the engine reads them.
var recordColumns = `request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token::text, claimed_at, lease_expires_at,
       lease_expires_at > now(),
       response_code, response_headers::text, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= now() AND ` + keytable.Finished + ` AND ` + NotAwaitingOperator + `,
       coalesce(recovery_point, ''), completed_at`

var selectRecord = `
SELECT ` + recordColumns + `
  FROM idempotency_keys
 WHERE scope = $1 AND idempotency_key = $2`

const countByStatus = `
SELECT status, COUNT(*), MIN(created_at) FROM idempotency_keys GROUP BY status`

// CountUnfinished counts the unfinished records by recovery point, with
// the oldest hold of each.
const CountUnfinished = `SELECT recovery_point, count(*), min(claimed_at) FROM idempotency_keys WHERE ` + keytable.Unfinished + ` GROUP BY recovery_point`

// sweepLock is a transaction-scoped advisory lock per key table (its oid
// tells schemas apart); the same statement bounds the wait for the
// table's lock, so a sweep queued behind a migration gives up.
const sweepLock = `
SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text))
  FROM set_config('lock_timeout', '2s', true)`

// Sweepable is true of a row a sweep may delete: past its expiry, not a
// claim whose lease is live, not an unfinished row
// (store.Capabilities.RecoveryPoints: model/payout.pml's sweeper skips
// UNKNOWN), not one holding the outcome-unknown answer
// (store.AwaitsOperator).
var Sweepable = `expires_at <= now()
            AND (status <> 'PROCESSING' OR lease_expires_at <= now())
            AND ` + keytable.Finished + `
            AND ` + NotAwaitingOperator

var sweepSelect = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE ` + Sweepable + `
 ORDER BY expires_at
 LIMIT $1
   FOR UPDATE SKIP LOCKED`
