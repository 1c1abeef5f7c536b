package pgsql

import "embed"

// Migrations holds the key table's PostgreSQL migrations, in folder
// "migrations" as NNN_name.sql, written for the default table: the one
// copy pgstore and sqlstore's PostgreSQL dialect both apply.
//
//go:embed migrations/*.sql
var Migrations embed.FS
