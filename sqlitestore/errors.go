package sqlitestore

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrBusy is the error of a wait for the database's write lock that ran out
// while a connection outside the Store held the lock: another process on
// the same file, or a transaction of the application's own. No request of
// the Store holds the key, so it is not store.ErrWaitTimeout (which the
// middleware answers with 409 in-flight): the middleware answers 503
// store-unavailable, and a retry with the same key may succeed.
var ErrBusy = errors.New("sqlitestore: the database is write-locked by a connection outside the store")

// translate turns a driver error into the store's errors, once, at the
// store boundary. SQLITE_BUSY and SQLITE_LOCKED mean a lock that a
// connection outside the store holds outlasted the connection's
// busy_timeout: the store's own transactions queue on its gate instead.
func translate(err error) error {
	if busy(err) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
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
