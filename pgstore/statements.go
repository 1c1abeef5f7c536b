package pgstore

import (
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
)

// statements are the store's SQL on its key table. The constants are
// written for the default table; newStatements rewrites them once, when
// the store is made.
type statements struct {
	selectRecord, insertClaim, reacquire, complete, completeOrAbort, fail, renew  string
	insertCompletedOrAbort, sweepLeaves                                           string
	listCompleted, release, replaceResponse, selectPhase, advance, findUnfinished string
	resumeUnfinished                                                              string
	// table is the key table's name, for the operator's statements, built
	// per search (operator.go).
	table string
}

func newStatements(table string) *statements {
	r := func(sql string) string { return keytable.Rewrite(sql, table) }
	return &statements{
		selectRecord:           r(selectRecord),
		insertClaim:            r(pgsql.InsertClaim),
		reacquire:              r(pgsql.Reacquire),
		complete:               r(pgsql.Complete),
		completeOrAbort:        r(completeOrAbort),
		fail:                   r(pgsql.Fail),
		renew:                  r(pgsql.Renew),
		insertCompletedOrAbort: r(insertCompletedOrAbort),
		sweepLeaves:            r(sweepLeaves),
		listCompleted:          r(pgsql.ListCompleted),
		release:                r(pgsql.Release),
		replaceResponse:        r(pgsql.ReplaceResponse),
		selectPhase:            r(pgsql.SelectPhase),
		advance:                r(pgsql.Advance),
		findUnfinished:         r(pgsql.FindUnfinished),
		resumeUnfinished:       r(pgsql.ResumeUnfinished),
		table:                  table,
	}
}
