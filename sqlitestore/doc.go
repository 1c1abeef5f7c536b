// Package sqlitestore is the embedded store.Store: idempotency records in a
// SQLite database file, on the pure-Go driver modernc.org/sqlite (no cgo),
// for one node and zero setup. It passes the same conformance suite
// (package storetest) as pgstore; choose pgstore when more than one host
// serves the API or writes must run in parallel.
//
//	db, err := sqlitestore.Open("payments.db")
//	…
//	if _, err := sqlitestore.Migrate(ctx, db); err != nil { … }
//	mw, err := idem.New(sqlitestore.New(db), idem.Config{Mode: idem.ModeAtomic})
//
// # Locking
//
// SQLite locks the whole database, not rows. Every transaction of the store
// takes the write lock at its first statement (BEGIN IMMEDIATE) and keeps
// it until it ends, waiting at most its bound (store.TxOptions.MaxWait;
// DefaultMaxWait for the Store's own operations). Running out behind a
// request of this store is store.ErrWaitTimeout, answered 409 in-flight;
// running out behind a writer outside the store (another process on the
// file, a transaction of the application's own) is ErrBusy, answered 503
// store-unavailable: no request holds the key. Readers never wait for the
// writer (Open sets WAL mode), so replays go through while a request holds
// the write lock.
//
// In idem.ModeAtomic idempotent requests therefore run one at a time: a
// duplicate waits for the write lock, then replays. In idem.ModeLeased the
// handler's transaction takes the lock at its first statement, so a call
// outside the database (a bank) belongs before it, not between statements.
//
// docs/operations.md (SQLite) says more: why the store reads this host's
// clock, and how it keeps what it commits.
package sqlitestore
