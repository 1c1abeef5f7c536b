// Package sqlrow makes a *sql.Row that reports an error, for the stores'
// database/sql handles whose transaction failed to begin.
package sqlrow

import (
	"database/sql"
	"time"
)

// Err returns a *sql.Row whose Scan reports err. database/sql has no
// constructor for one, but a query on a context that is already done fails
// with the context's Err before it reaches the database.
func Err(db *sql.DB, err error) *sql.Row {
	return db.QueryRowContext(failedContext{err}, "SELECT 1")
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// failedContext is a context that is done, with err as its Err.
type failedContext struct{ err error }

func (failedContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (failedContext) Done() <-chan struct{}       { return closed }
func (f failedContext) Err() error                { return f.err }
func (failedContext) Value(any) any               { return nil }
