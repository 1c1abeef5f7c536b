package sqlstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
)

// Dialect is the SQL of one database: its statements, its clock, its
// placeholders and how its driver reports the errors the store must tell
// apart. The zero Dialect is PostgreSQL.
type Dialect struct{ d *engine.Dialect }

func (d Dialect) engine() engine.Dialect {
	if d.d == nil {
		return postgres
	}
	return *d.d
}

// String names the dialect.
func (d Dialect) String() string { return d.engine().Name }

// finished is true of a row that is not unfinished (keytable.Finished).
const finished = keytable.Finished

// DefaultTable is the key table's name when Config.Table is empty.
const DefaultTable = keytable.Default

// withTable writes table into sql, written for DefaultTable.
func withTable(sql, table string) string { return keytable.Rewrite(sql, table) }

// stmt is a statement, its placeholders in the canonical order of its
// arguments (engine.Statements).
func stmt(sql, table string) engine.Stmt { return engine.Stmt{SQL: withTable(sql, table)} }

// ordered is a statement whose i-th placeholder takes canonical argument
// order[i].
func ordered(sql, table string, order ...int) engine.Stmt {
	return engine.Stmt{SQL: withTable(sql, table), Order: order}
}

var postgres = engine.Dialect{
	Name:            "postgres",
	Statements:      pgsql.Statements,
	Classify:        postgresClassify,
	Placeholder:     pgsql.Placeholder,
	LockWait:        pgsql.LockWait,
	RestoreLockWait: pgsql.RestoreLockWait,
	SweepLockInTx:   true,
	MigrationFS:     pgsql.Migrations,
	MigrationDir:    "migrations",
	Migrate:         postgresMigrate,
}

// Postgres is the PostgreSQL dialect, for pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib) or lib/pq. Any driver whose errors have
// a SQLState() string method works.
func Postgres() Dialect { return Dialect{&postgres} }

// MySQL is the MySQL and MariaDB (InnoDB) dialect; number reads the server
// error number out of the driver's error. Package mysqlstore binds it to
// github.com/go-sql-driver/mysql: use that.
func MySQL(number func(err error) (uint16, bool)) Dialect {
	return Dialect{&engine.Dialect{
		Name:            "mysql",
		Statements:      mysqlStatements,
		Classify:        mysqlClassify(number),
		ChangedRows:     true,
		Placeholder:     func(int) string { return "?" },
		LockWait:        mysqlLockWait,
		RestoreLockWait: `SET SESSION innodb_lock_wait_timeout = @idem_lock_wait`,
		MigrationFS:     mysqlMigrations,
		MigrationDir:    "migrations/mysql",
		Migrate:         mysqlMigrate,
	}}
}

func postgresClassify(err error) engine.ErrKind {
	var e interface{ SQLState() string }
	if !errors.As(err, &e) {
		return engine.ErrOther
	}
	return pgsql.Classify(e.SQLState())
}

func mysqlClassify(number func(error) (uint16, bool)) func(error) engine.ErrKind {
	return func(err error) engine.ErrKind {
		n, ok := number(err)
		if !ok {
			return engine.ErrOther
		}
		switch n {
		case 1205: // ER_LOCK_WAIT_TIMEOUT
			return engine.ErrLockTimeout
		case 1213: // ER_LOCK_DEADLOCK
			return engine.ErrDeadlock
		case 1062: // ER_DUP_ENTRY
			return engine.ErrDuplicate
		}
		return engine.ErrOther
	}
}

// mysqlLockWait sets innodb_lock_wait_timeout, which counts whole seconds:
// d is rounded up to the next second.
func mysqlLockWait(d time.Duration) string {
	secs := max((d+time.Second-1)/time.Second, 1)
	return fmt.Sprintf(`SET @idem_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = %d`, secs)
}

// countByStatus counts the records by status (MySQL).
const countByStatus = `
SELECT status, COUNT(*), MIN(created_at) FROM idempotency_keys GROUP BY status`
