// Package sqlstore keeps idempotency records in a database reached
// through database/sql: PostgreSQL (pgx's github.com/jackc/pgx/v5/stdlib or
// lib/pq, dialect Postgres) or MySQL and MariaDB (package mysqlstore binds
// dialect MySQL to github.com/go-sql-driver/mysql).
//
// The request's transaction is a real *sql.Tx, and DB hands it to
// repositories as a DBTX: what sqlc's database/sql output and GORM's
// ConnPool take. A repository's writes then commit together with the
// request's idempotency key, or not at all.
//
// # Isolation
//
// Every transaction of the store runs at READ COMMITTED, whatever the
// database's default. In PostgreSQL that is the default already. InnoDB's
// default is REPEATABLE READ, under which a claim that waited for the
// transaction holding its key would, once that one committed, read the
// snapshot its own transaction began with and miss the record; and whose
// gap (next-key) locks would make concurrent claims on neighbouring keys
// deadlock. Under READ COMMITTED each statement reads the latest committed
// rows, and InnoDB locks the records it touches, not the gaps.
//
// # Waits
//
// A claim waits for a transaction that holds its key at most
// TxOptions.MaxWait (lock_timeout in PostgreSQL; innodb_lock_wait_timeout
// in MySQL, which counts whole seconds, so the bound is rounded up to the
// next second), then fails with store.ErrWaitTimeout. InnoDB may instead
// pick a claim as a deadlock's victim when several wait for one key; the
// store runs the claim again when nothing else was lost with the
// rolled-back transaction.
package sqlstore
