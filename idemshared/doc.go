// Package idemshared holds no code: module idemshared is what the store
// modules (pgstore, sqlitestore, sqlstore, mysqlstore) share below the
// store.Store interface: the key record's logic, written once behind a
// dialect and an executor (engine: pgstore's pgx, sqlstore's PostgreSQL
// and MySQL and sqlitestore's SQLite through database/sql), the key table's checks and statements (keytable,
// keytable/pgsql), its PostgreSQL migrations, written once for pgstore and
// sqlstore (keytable/pgsql/migrations), the migration files' loader
// (migrate) and row scanning (sqlrow).
//
// It makes no compatibility promise. Its packages change whenever the
// stores need them to; it is released in lockstep with the other modules
// of this repository, each tagged at the same version (docs/releasing.md),
// and a store requires the idemshared of its own release. Import a store,
// not this module.
package idemshared
