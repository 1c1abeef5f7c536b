package sqlitestore

import "github.com/idem-dev/idem/idemshared/keytable"

// statements are the store's SQL on its key table. The constants are
// written for the default table; newStatements rewrites them once, when
// the store is made.
type statements struct {
	selectRecord, insertClaim, reacquire, complete, fail, renew, deleteExpired    string
	listCompleted, release, replaceResponse, selectPhase, advance, findUnfinished string
	resumeUnfinished                                                              string
	// table is the key table's name, for the operator's statements, built
	// per search (operator.go).
	table string
}

func newStatements(table string) *statements {
	r := func(sql string) string { return keytable.Rewrite(sql, table) }
	return &statements{
		selectRecord:     r(selectRecord),
		insertClaim:      r(insertClaim),
		reacquire:        r(reacquire),
		complete:         r(complete),
		fail:             r(fail),
		renew:            r(renew),
		deleteExpired:    r(deleteExpired),
		listCompleted:    r(listCompleted),
		release:          r(release),
		replaceResponse:  r(replaceResponse),
		selectPhase:      r(selectPhase),
		advance:          r(advance),
		findUnfinished:   r(findUnfinished),
		resumeUnfinished: r(resumeUnfinished),
		table:            table,
	}
}
