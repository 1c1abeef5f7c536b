package sqlstore

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
)

// Dialect is the SQL of one database: its statements, its clock, its
// placeholders and how its driver reports the errors the store must tell
// apart. The zero Dialect is PostgreSQL.
type Dialect struct {
	name string
	// statements returns the store's SQL on table, a validated identifier.
	statements func(table string) statements
	// classify names the kind of a driver error.
	classify func(err error) errKind
	// changedRows: the driver's rows-affected count is of changed rows, not
	// matched ones (MySQL), so a fenced update that changes nothing is
	// confirmed with a read.
	changedRows bool
	// placeholder is the n-th (1-based) parameter's placeholder.
	placeholder func(n int) string
	// lockWait bounds the waits of the statements that follow it on the
	// connection on rows other transactions hold; restoreLockWait undoes it.
	lockWait        func(d time.Duration) string
	restoreLockWait string
	// sweepLockInTx: the sweep lock is the transaction's (PostgreSQL's
	// advisory transaction lock); else it is the session's, released after
	// the commit by sweepUnlock (MySQL's GET_LOCK).
	sweepLockInTx bool
	migrationFS   fs.FS  // holds this dialect's migrations, NNN_name.sql,
	migrationDir  string // in this folder
	migrate       migrateSQL
}

// errKind is the kind of a driver error the store acts on.
type errKind int

const (
	errOther       errKind = iota
	errLockTimeout         // a lock wait ran out its bound
	errDeadlock            // the database chose this transaction as a deadlock's victim and rolled it back
	errDuplicate           // a unique key violation
	errInFailedTx          // the transaction is aborted by an earlier error (PostgreSQL)
)

func (d Dialect) orDefault() Dialect {
	if d.name == "" {
		return Postgres()
	}
	return d
}

// String names the dialect.
func (d Dialect) String() string { return d.orDefault().name }

// finished is true of a row that is not unfinished (keytable.Finished).
const finished = keytable.Finished

// DefaultTable is the key table's name when Config.Table is empty.
const DefaultTable = keytable.Default

// withTable writes table into sql, written for DefaultTable.
func withTable(sql, table string) string { return keytable.Rewrite(sql, table) }

// stmt is a statement and the order of its parameters: args[i] of the
// operation's canonical arguments goes to the i-th placeholder. A nil
// order is the canonical order.
type stmt struct {
	sql   string
	order []int
}

func (s stmt) args(canonical ...any) []any {
	if s.order == nil {
		return canonical
	}
	out := make([]any, len(s.order))
	for i, j := range s.order {
		out[i] = canonical[j]
	}
	return out
}

// statements are a dialect's SQL on one table. The canonical arguments of
// each are listed beside it.
type statements struct {
	// scope, key
	get stmt
	// scope, key, method, path, hash, version, token, lease µs, ttl µs
	insert stmt
	// scope, key, method, path, hash, version, token, ttl µs, code, headers, body, resource type, resource id
	insertCompleted stmt
	// scope, key, method, path, hash, version, token, lease µs, ttl µs, previous token
	reacquire stmt
	// scope, key, token, code, headers, body, resource type, resource id
	complete stmt
	// scope, key, token
	fail stmt
	// scope, key, token, lease µs
	renew stmt
	// scope, key, token: whether the token holds the key (changedRows)
	holds stmt
	// scope, key, token: the recovery point ("" for none), created_at and
	// the provider keys (JSON text, NULL for none)
	phase stmt
	// scope, key, token, point, provider keys (JSON text or NULL)
	advance stmt
	// limit: abandoned unfinished records, oldest hold first
	findUnfinished stmt
	// scope, key, token, lease µs, ttl µs, previous token
	resumeUnfinished stmt
	// the sweep lock, a boolean; sweepUnlock releases a session lock
	sweepLock, sweepUnlock string
	// limit: the keys of expired records, locked, skipping locked ones
	sweepSelect stmt
	// sweepDelete is the DELETE to which the keys' conditions are added.
	sweepDelete string

	// The operator's (operator.go): a record's columns as scanRecord reads
	// them, for ListKeys; the search's dialect.
	columns string
	search  keytable.Dialect
	// code, after scope, after key, limit
	listCompleted stmt
	// scope, key, token
	release stmt
	// scope, key, token, code, headers, body, resource type, resource id
	replaceResponse stmt
	// scope, key, token: whether the token holds the COMPLETED record
	// (changedRows)
	holdsCompleted stmt
	// the store's clock; the records by status: status, count, oldest
	// created_at; the unfinished by recovery point: point, count, oldest
	// claimed_at
	now, countByStatus, countUnfinished string
	// scope, key: the provider keys as JSON text, NULL for none
	providerKeys stmt
	// actor, action, reason, scope, key, before, after
	appendAudit stmt
	// scope ("" for every key), key, limit
	listAudit stmt
}

// errNumber is how a MySQL driver error is read: its server error number.
type errNumber func(err error) (uint16, bool)

// Postgres is the PostgreSQL dialect, for pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib) or lib/pq. Any driver whose errors have
// a SQLState() string method works.
func Postgres() Dialect {
	return Dialect{
		name:            "postgres",
		statements:      postgresStatements,
		classify:        postgresClassify,
		placeholder:     func(n int) string { return fmt.Sprintf("$%d", n) },
		lockWait:        postgresLockWait,
		restoreLockWait: `SET LOCAL lock_timeout TO DEFAULT`,
		sweepLockInTx:   true,
		migrationFS:     pgsql.Migrations,
		migrationDir:    "migrations",
		migrate:         postgresMigrate,
	}
}

// MySQL is the MySQL and MariaDB (InnoDB) dialect; number reads the server
// error number out of the driver's error. Package mysqlstore binds it to
// github.com/go-sql-driver/mysql: use that.
func MySQL(number func(err error) (uint16, bool)) Dialect {
	return Dialect{
		name:            "mysql",
		statements:      mysqlStatements,
		classify:        mysqlClassify(number),
		changedRows:     true,
		placeholder:     func(int) string { return "?" },
		lockWait:        mysqlLockWait,
		restoreLockWait: `SET SESSION innodb_lock_wait_timeout = @idem_lock_wait`,
		migrationFS:     mysqlMigrations,
		migrationDir:    "migrations/mysql",
		migrate:         mysqlMigrate,
	}
}

func postgresClassify(err error) errKind {
	var e interface{ SQLState() string }
	if !errors.As(err, &e) {
		return errOther
	}
	switch e.SQLState() {
	case "55P03": // lock_not_available: lock_timeout fired
		return errLockTimeout
	case "40P01":
		return errDeadlock
	case "23505":
		return errDuplicate
	case "25P02":
		return errInFailedTx
	}
	return errOther
}

func mysqlClassify(number func(error) (uint16, bool)) func(error) errKind {
	return func(err error) errKind {
		n, ok := number(err)
		if !ok {
			return errOther
		}
		switch n {
		case 1205: // ER_LOCK_WAIT_TIMEOUT
			return errLockTimeout
		case 1213: // ER_LOCK_DEADLOCK
			return errDeadlock
		case 1062: // ER_DUP_ENTRY
			return errDuplicate
		}
		return errOther
	}
}

// postgresLockWait sets lock_timeout for the transaction; restoreLockWait
// gives the handler's statements the session's default back. SET LOCAL,
// unlike set_config, is what Citus passes on to its workers
// (citus.propagate_set_commands = 'local').
func postgresLockWait(d time.Duration) string {
	return fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, max(d.Milliseconds(), 1))
}

// mysqlLockWait sets innodb_lock_wait_timeout, which counts whole seconds:
// d is rounded up to the next second.
func mysqlLockWait(d time.Duration) string {
	secs := max((d+time.Second-1)/time.Second, 1)
	return fmt.Sprintf(`SET @idem_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = %d`, secs)
}
