package pgsql

import "embed"

// Migrations holds the key table's PostgreSQL migrations, in folder
// "migrations" as NNN_name.sql, written for the default table: the one
// copy pgstore and sqlstore's PostgreSQL dialect both apply.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// MigrationsTable creates the table recording applied migrations, %s its
// quoted name: pgstore's (pgmigrate) and sqlstore's PostgreSQL dialect's,
// which may share a schema.
const MigrationsTable = `CREATE TABLE IF NOT EXISTS %s (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
