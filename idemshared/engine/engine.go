// Package engine is the key record's logic over database/sql, written once
// for every SQL store: the claim, the re-acquire, the fenced completion,
// failure and renewal, the recovery points, the completer's search, the
// sweep's batches and the operator's reads and actions with their audit
// entries. A store is a thin driver: a Dialect (its statements, its
// placeholders, its clock, how its driver's errors read) and the sessions
// its operations run in.
//
// Like the rest of module idemshared it makes no compatibility promise:
// import a store, not this package.
package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// Dialect is the SQL of one database: its statements, its clock, its
// placeholders and how its driver reports the errors the store must tell
// apart.
type Dialect struct {
	Name string
	// Statements returns the store's SQL on table, a validated identifier.
	Statements func(table string) Statements
	// Classify names the kind of a driver error.
	Classify func(err error) ErrKind
	// Translate, when set, turns a driver error into the store package's
	// errors instead of the translation by Classify.
	Translate func(err error) error
	// ChangedRows: the driver's rows-affected count is of changed rows, not
	// matched ones (MySQL), so a fenced update that changes nothing is
	// confirmed with a read.
	ChangedRows bool
	// Placeholder is the n-th (1-based) parameter's placeholder.
	Placeholder func(n int) string
	// Now, when set, is a time as the table keeps it: the database has no
	// clock the store reads, and statements take this host's time as the
	// named parameter now (SQLite). Nil: the database's clock.
	Now func(t time.Time) any
	// LockWait bounds the waits of the statements that follow it on the
	// connection on rows other transactions hold; RestoreLockWait undoes
	// it.
	LockWait        func(d time.Duration) string
	RestoreLockWait string
	// SweepLockInTx: the sweep lock is the transaction's (PostgreSQL's
	// advisory transaction lock); else it is the session's, released after
	// the commit by Statements.SweepUnlock (MySQL's GET_LOCK).
	SweepLockInTx bool
	MigrationFS   fs.FS  // holds this dialect's migrations, NNN_name.sql,
	MigrationDir  string // in this folder
	Migrate       MigrateSQL
}

// ErrKind is the kind of a driver error the store acts on.
type ErrKind int

const (
	ErrOther       ErrKind = iota
	ErrLockTimeout         // a lock wait ran out its bound
	ErrDeadlock            // the database chose this transaction as a deadlock's victim and rolled it back
	ErrDuplicate           // a unique key violation
	ErrInFailedTx          // the transaction is aborted by an earlier error (PostgreSQL)
)

// Stmt is a statement and how the operation's canonical arguments (listed
// beside each of Statements) bind to it.
type Stmt struct {
	SQL string
	// Order: args[i] of the canonical arguments goes to the i-th
	// placeholder; -1 is the store's clock (Dialect.Now). Nil is the
	// canonical order.
	Order []int
	// Names, when set, names each canonical argument: they bind as named
	// parameters, and the store's clock as now (Dialect.Now).
	Names []string
}

// Statements are a dialect's SQL on one table. The canonical arguments of
// each are listed beside it.
type Statements struct {
	// scope, key
	Get Stmt
	// scope, key, method, path, hash, version, token, lease µs, ttl µs
	Insert Stmt
	// scope, key, method, path, hash, version, token, ttl µs, code, headers, body, resource type, resource id
	InsertCompleted Stmt
	// scope, key, method, path, hash, version, token, lease µs, ttl µs, previous token
	Reacquire Stmt
	// scope, key, token, code, headers, body, resource type, resource id
	Complete Stmt
	// scope, key, token
	Fail Stmt
	// scope, key, token, lease µs
	Renew Stmt
	// scope, key, token: whether the token holds the key (ChangedRows)
	Holds Stmt
	// scope, key, token: the recovery point ("" for none), created_at and
	// the provider keys (JSON text, NULL for none)
	Phase Stmt
	// scope, key, token, point, provider keys (JSON text or NULL)
	Advance Stmt
	// limit: abandoned unfinished records, oldest hold first
	FindUnfinished Stmt
	// scope, key, token, lease µs, ttl µs, previous token
	ResumeUnfinished Stmt
	// The sweep lock, a boolean; SweepUnlock releases a session lock.
	SweepLock, SweepUnlock string
	// limit: the keys of expired records, locked, skipping locked ones
	SweepSelect Stmt
	// SweepDelete is the DELETE to which the keys' conditions are added.
	SweepDelete string
	// limit: when set, deletes the expired records and returns their
	// keys in one statement, in place of SweepSelect and SweepDelete.
	DeleteExpired Stmt

	// The operator's (operator.go): a record's columns as scanRecord reads
	// them, for ListKeys; the search's dialect.
	Columns string
	Search  keytable.Dialect
	// code, after scope, after key, limit
	ListCompleted Stmt
	// scope, key, token
	Release Stmt
	// scope, key, token, code, headers, body, resource type, resource id
	ReplaceResponse Stmt
	// scope, key, token: whether the token holds the COMPLETED record
	// (ChangedRows)
	HoldsCompleted Stmt
	// The store's clock ("": this host's); the records by status: status,
	// count, oldest created_at; the unfinished by recovery point: point,
	// count, oldest claimed_at.
	Now, CountByStatus, CountUnfinished string
	// scope, key: the provider keys as JSON text, NULL for none
	ProviderKeys Stmt
	// actor, action, reason, scope, key, before, after
	AppendAudit Stmt
	// scope ("" for every key), key, limit
	ListAudit Stmt
}

// Engine runs a key table's SQL in one dialect on one database.
type Engine struct {
	name    string // the store's package, prefixed to its own errors
	db      *sql.DB
	dialect Dialect
	table   string
	sql     Statements // built once, on the table
	// sweep runs a sweep's batch; nil is sweepTx.
	sweep func(ctx context.Context, fn func(q Querier, now time.Time) error) error
}

// Config configures an Engine.
type Config struct {
	Name    string // the store's package, prefixed to its own errors
	DB      *sql.DB
	Dialect Dialect
	// Table is the key table's name, a plain identifier; "" is
	// keytable.Default.
	Table string
	// Sweep, when set, runs a sweep's batch (DeleteExpired) in a
	// transaction holding the sweep lock, and says store.ErrSweepBusy
	// when it cannot have it; nil is the dialect's sweep locks.
	Sweep func(ctx context.Context, batch func(q Querier, now time.Time) error) error
}

// New returns the engine cfg describes. It fails when cfg.Table is not an
// identifier.
func New(cfg Config) (*Engine, error) {
	table, err := keytable.Check(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	d := cfg.Dialect
	return &Engine{name: cfg.Name, db: cfg.DB, dialect: d, table: table, sql: d.Statements(table), sweep: cfg.Sweep}, nil
}

// DB returns the database the store runs on.
func (e *Engine) DB() *sql.DB { return e.db }

// Table returns the key table's name.
func (e *Engine) Table() string { return e.table }

// translate turns a driver error into the store package's errors, once,
// at the store's boundary.
func (e *Engine) translate(err error) error {
	if err == nil {
		return nil
	}
	if e.dialect.Translate != nil {
		return e.dialect.Translate(err)
	}
	switch e.classify(err) {
	case ErrLockTimeout:
		return errors.Join(store.ErrWaitTimeout, err)
	case ErrInFailedTx, ErrDeadlock:
		// A deadlock's victim is rolled back whole (InnoDB) or aborted
		// (PostgreSQL).
		return errors.Join(store.ErrTxAborted, err)
	}
	return err
}

func (e *Engine) classify(err error) ErrKind {
	if e.dialect.Classify == nil {
		return ErrOther
	}
	return e.dialect.Classify(err)
}

// args binds the canonical arguments to s, with now the store's clock
// where the dialect has none.
func (e *Engine) args(s Stmt, now time.Time, canonical ...any) []any {
	switch {
	case s.Names != nil:
		out := make([]any, 0, len(canonical)+1)
		for i, n := range s.Names {
			out = append(out, sql.Named(n, canonical[i]))
		}
		if e.dialect.Now != nil {
			out = append(out, sql.Named("now", e.dialect.Now(now)))
		}
		return out
	case s.Order == nil:
		return canonical
	}
	out := make([]any, len(s.Order))
	for i, j := range s.Order {
		if j < 0 {
			out[i] = e.dialect.Now(now)
			continue
		}
		out[i] = canonical[j]
	}
	return out
}

// now is the store's reading of this host's clock, for a dialect whose
// statements take it; the zero time for one that reads its own.
func (e *Engine) now() time.Time {
	if e.dialect.Now == nil {
		return time.Time{}
	}
	return time.Now()
}
