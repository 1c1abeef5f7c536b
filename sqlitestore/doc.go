// Package sqlitestore is the embedded store.Store: idempotency records in a
// SQLite database file, on the pure-Go driver modernc.org/sqlite (no cgo).
// It passes the same conformance suite (package storetest) as pgstore.
//
//	db, err := sqlitestore.Open("payments.db")
//	…
//	if _, err := sqlitestore.Migrate(ctx, db); err != nil { … }
//	mw, err := idem.New(sqlitestore.New(db), idem.Config{Mode: idem.ModeAtomic})
//
// # When to choose it
//
// Choose SQLite for a single node and zero setup: a quickstart, a small
// service, tests, an edge deployment. The database is a file next to the
// process; nothing to run or operate. Choose PostgreSQL (pgstore) when more
// than one host serves the API, or when writes must run in parallel:
// SQLite has one writer at a time per database, and every idempotent
// request writes.
//
// # Locking
//
// SQLite locks the whole database, not rows. Every transaction of the store
// takes the write lock at its first statement with BEGIN IMMEDIATE (so it
// never upgrades a read lock, which in WAL mode fails instead of waiting)
// and keeps it until it ends. A transaction waiting for it waits at most
// its bound (TxOptions.MaxWait, DefaultMaxWait for the Store's own
// operations). The store's transactions queue on a gate in the process
// first, so the next one starts the moment the last ends; running out there,
// behind a request of this store, is store.ErrWaitTimeout, which the
// middleware answers with 409 in-flight and Retry-After. BEGIN IMMEDIATE
// then waits only for writers outside the store (the application's own
// transactions, other processes on the same file), under the connection's
// busy_timeout and within the same bound; running out there is ErrBusy,
// which the middleware answers with 503 store-unavailable: no request holds
// the key.
//
// In WAL mode (which Open sets and checks) readers never wait for the
// writer: Get, and so every replay, goes through while a request holds the
// write lock.
//
// # Atomic mode
//
// In idem.ModeAtomic the claim, the handler's writes (through DB) and the
// completion run in one transaction. On PostgreSQL a duplicate's INSERT
// waits on the unique index for the first transaction; here the duplicate's
// claim waits on the database's write lock, which the first request holds
// from its claim to its commit. Then the duplicate's INSERT finds the
// COMPLETED row and replays it, or, if the first rolled back, claims the
// key. A crash releases the lock with the transaction, so no lease is
// needed. The cost is that idempotent requests run one at a time, which
// for a handler that only writes to this database is what SQLite would do
// with its writes anyway.
//
// # Leased mode
//
// In idem.ModeLeased the claim commits before the handler runs, and the
// handler's transaction takes the write lock only at its first statement.
// Calls outside the database (a bank, a card network) therefore belong
// before the handler's first statement: between statements they would hold
// every other writer of the file, lease renewals included, waiting. While
// a handler holds the write lock its lease cannot be renewed, but it cannot
// be taken over either: a takeover is a write, and waits for the lock.
//
// # Time
//
// The design asks that lock expiry and retention be judged by the
// database's clock, never the application's, because application hosts'
// clocks disagree. SQLite is a library inside this process: its clock is
// this host's clock, and every process that can open the file runs on this
// host (SQLite does not support sharing a database over a network file
// system). So the store reads time.Now() once per operation, after it holds
// the write lock, passes it to the SQL as a parameter, and derives every
// time the operation stores or compares from it. Times are stored as
// INTEGER microseconds since the Unix epoch (UTC), the precision of
// PostgreSQL's timestamptz.
//
// # Durability
//
// Open sets synchronous=FULL: the WAL is synced at every commit, so a
// response the middleware has sent, having committed first, survives a
// power loss.
package sqlitestore
