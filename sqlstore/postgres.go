package sqlstore

import (
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
)

// postgresStatements are pgstore's statements, on database/sql.
func postgresStatements(table string) engine.Statements {
	columns := `request_method, request_path, request_hash, fingerprint_version,
       status, attempts, fencing_token::text, claimed_at, lease_expires_at,
       lease_expires_at > now(),
       response_code, response_headers::text, response_body, resource_type, resource_id,
       created_at, expires_at, expires_at <= now() AND ` + finished + ` AND ` + pgsql.NotAwaitingOperator + `,
       coalesce(recovery_point, '')`
	record := `
SELECT ` + columns + `
  FROM idempotency_keys
 WHERE scope = $1 AND idempotency_key = $2`
	// A transaction-scoped advisory lock per key table (its oid tells
	// schemas apart); the same statement bounds the wait for the table's
	// lock, so a sweep queued behind a migration gives up.
	const sweepLock = `
SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text))
  FROM set_config('lock_timeout', '2s', true)`
	sweepSelect := `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE expires_at <= now()
   AND (status <> 'PROCESSING' OR lease_expires_at <= now())
   AND ` + finished + `
   AND ` + pgsql.NotAwaitingOperator + `
 ORDER BY expires_at
 LIMIT $1
   FOR UPDATE SKIP LOCKED`
	return engine.Statements{
		Search:          keytable.Dialect{Arg: func(n int) string { return "$" + strconv.Itoa(n) }, Time: func(t time.Time) any { return t }},
		ListCompleted:   stmt(pgsql.ListCompleted, table),
		Release:         stmt(pgsql.Release, table),
		ReplaceResponse: stmt(pgsql.ReplaceResponse, table),
		Now:             `SELECT now()`,
		CountByStatus:   withTable(countByStatus, table),
		CountUnfinished: withTable(`SELECT recovery_point, count(*), min(claimed_at) FROM idempotency_keys WHERE `+keytable.Unfinished+` GROUP BY recovery_point`, table),
		ProviderKeys:    stmt(`SELECT provider_keys::text FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2`, table),
		AppendAudit:     stmt(pgsql.AppendAudit, table),
		ListAudit:       stmt(pgsql.ListAudit, table),
		Columns:         columns,
		Get:             stmt(record, table),
		Insert:          stmt(pgsql.InsertClaim, table),
		// A plain INSERT: on a recorded key it fails, which aborts the
		// transaction with everything the handler wrote.
		InsertCompleted:  stmt(pgsql.InsertCompleted, table),
		Reacquire:        stmt(pgsql.Reacquire, table),
		Complete:         stmt(pgsql.Complete, table),
		Fail:             stmt(pgsql.Fail, table),
		Renew:            stmt(pgsql.Renew, table),
		Phase:            stmt(pgsql.SelectPhase, table),
		Advance:          stmt(pgsql.Advance, table),
		FindUnfinished:   stmt(pgsql.FindUnfinished, table),
		ResumeUnfinished: stmt(pgsql.ResumeUnfinished, table),
		SweepLock:        withTable(sweepLock, table),
		SweepSelect:      stmt(sweepSelect, table),
		SweepDelete:      withTable(`DELETE FROM idempotency_keys WHERE `, table),
	}
}
