package pgstore

import (
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
)

// dialect is the engine's PostgreSQL through pgx: the key table's
// statements (engineStatements), pgx's errors and times. The statements
// that wait for a row another transaction holds, the sweep and the counts
// are the store's own: its sessions pipeline them (session.go).
var dialect = engine.Dialect{
	Name:        "pgstore",
	Statements:  engineStatements,
	Translate:   translate,
	TimeScans:   true,
	Placeholder: placeholder,
}

// placeholder is the n-th parameter's.
func placeholder(n int) string { return "$" + strconv.Itoa(n) }

// recordColumns are a record's columns as the engine reads them.
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

const selectProviderKeys = `
SELECT provider_keys::text FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2`

// finished is true of a row that is not unfinished (keytable.Finished).
const finished = keytable.Finished

// engineStatements are the statements the engine runs, on table.
func engineStatements(table string) engine.Statements {
	s := func(sql string) engine.Stmt { return engine.Stmt{SQL: keytable.Rewrite(sql, table)} }
	return engine.Statements{
		Get:              s(selectRecord),
		Insert:           s(pgsql.InsertClaim),
		Reacquire:        s(pgsql.Reacquire),
		Complete:         s(pgsql.Complete),
		Fail:             s(pgsql.Fail),
		Renew:            s(pgsql.Renew),
		Phase:            s(pgsql.SelectPhase),
		Advance:          s(pgsql.Advance),
		FindUnfinished:   s(pgsql.FindUnfinished),
		ResumeUnfinished: s(pgsql.ResumeUnfinished),
		Columns:          recordColumns,
		Search:           keytable.Dialect{Arg: placeholder, Time: func(t time.Time) any { return t }},
		ListCompleted:    s(pgsql.ListCompleted),
		Release:          s(pgsql.Release),
		ReplaceResponse:  s(pgsql.ReplaceResponse),
		ProviderKeys:     s(selectProviderKeys),
		AppendAudit:      s(pgsql.AppendAudit),
		ListAudit:        s(pgsql.ListAudit),
	}
}

// statements are the store's own SQL on its key table: the completion
// and the deferred claim pipelined with the COMMIT, the sweep's. The
// constants are written for the default table; newStatements rewrites
// them once, when the store is made.
type statements struct {
	completeOrAbort, insertCompletedOrAbort, sweepLeaves string
	// table is the key table's name, for the counts and the sweep's
	// statements, built per table holding its rows (sweep.go).
	table string
}

func newStatements(table string) *statements {
	r := func(sql string) string { return keytable.Rewrite(sql, table) }
	return &statements{
		completeOrAbort:        r(completeOrAbort),
		insertCompletedOrAbort: r(insertCompletedOrAbort),
		sweepLeaves:            r(sweepLeaves),
		table:                  table,
	}
}
