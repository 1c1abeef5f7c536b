// Package pgstore keeps idempotency records in PostgreSQL: the production
// store and the source of truth.
//
// The key table lives in the schema the pool's search_path names. Create or
// upgrade it with Migrate (safe from several replicas at once), or print
// MigrationSQL for your own migration tool.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if _, err := pgstore.Migrate(ctx, pool); err != nil { … }
//	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeAtomic})
//
// Repositories reach the request's transaction with DB, so their writes and
// the key's completion commit together:
//
//	pgstore.DB(ctx, pool).Exec(ctx, `INSERT INTO payments …`)
//
// Every statement is a round trip, and on a busy database round trips, not
// rows, are what a request costs. The store spends as few as it can: BEGIN
// travels with the claim, the key's completion with the COMMIT. A
// repository can send the writes whose results it does not read with
// Queue: they travel with its next statement, or with that COMMIT.
//
// Every time that decides a lease or an expiry is the database's now(),
// never an application clock. Every write to a record names its fencing
// token, and a statement that may wait for another transaction's hold on a
// key is bounded (store.TxOptions.MaxWait) by a lock_timeout for that
// statement alone.
//
// The key record's logic (the claim, fencing, the operator's actions, the
// recovery points) is the store engine's, shared with the other SQL
// stores (module idemshared); this package is its pgx driver: the
// executor, the sessions that pipeline, the request's transaction, the
// sweep and the counts. docs/operations.md covers the key table, the sweeper
// and PgBouncer.
package pgstore
