// Package repositories holds no code: its tests show repositories written
// with the database/sql tools teams already use (sqlc's generated code,
// sqlx, GORM) joining the request's transaction through sqlstore.DB and
// sqlitestore.DB, on PostgreSQL through lib/pq and pgx's database/sql
// driver and on SQLite: the handler's writes commit with the request's
// idempotency key, or roll back with it. It also runs sqlstore's
// conformance suite on lib/pq. A module of its own, so that no user of the
// stores downloads GORM, sqlx or lib/pq.
package repositories
