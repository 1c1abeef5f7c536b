package pgstore

import (
	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
)

// dialect is the engine's PostgreSQL through pgx: the key table's
// statements, which sqlstore's PostgreSQL dialect runs too, pgx's errors
// and times. The store's sessions pipeline a claim's bound with its
// statement (session.go); the sweep and the counts are its own.
var dialect = engine.Dialect{
	Name:        "pgstore",
	Statements:  pgsql.Statements,
	Translate:   translate,
	TimeScans:   true,
	Placeholder: pgsql.Placeholder,
}

// statements are the store's own SQL on its key table: the completion
// and the deferred claim pipelined with the COMMIT, the sweep's. The
// constants are written for the default table; newStatements rewrites
// them once, when the store is made.
type statements struct {
	completeOrAbort, insertCompletedOrAbort, unrecordedOrAbort, sweepLeaves string
	// table is the key table's name, for the counts and the sweep's
	// statements, built per table holding its rows (sweep.go).
	table string
}

func newStatements(table string) *statements {
	r := func(sql string) string { return keytable.Rewrite(sql, table) }
	return &statements{
		completeOrAbort:        r(completeOrAbort),
		insertCompletedOrAbort: r(insertCompletedOrAbort),
		unrecordedOrAbort:      r(unrecordedOrAbort),
		sweepLeaves:            r(sweepLeaves),
		table:                  table,
	}
}
