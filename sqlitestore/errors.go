package sqlitestore

import (
	"errors"

	"github.com/idem-dev/idem/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// translate turns a driver error into the library's sentinel errors, once,
// at the store boundary. SQLITE_BUSY and SQLITE_LOCKED mean a lock another
// connection holds outlasted the wait: the store's bounded wait, or the
// connection's busy_timeout.
func translate(err error) error {
	if busy(err) {
		return errors.Join(store.ErrWaitTimeout, err)
	}
	return err
}

func busy(err error) bool {
	e, ok := errors.AsType[*sqlite.Error](err)
	if !ok {
		return false
	}
	switch e.Code() & 0xff { // the primary code; extended codes are on
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
