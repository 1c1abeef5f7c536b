package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// DefaultMaxWait bounds a wait on a key another transaction holds when
// TxOptions.MaxWait is zero, and always for the Store's own operations.
const DefaultMaxWait = 5 * time.Second

// deadlockRetries is how many times a statement the database rolled back
// as a deadlock's victim is run again, where nothing else was lost with it.
const deadlockRetries = 5

// Config configures a Store.
type Config struct {
	// Dialect is the database's SQL. Default (zero): Postgres().
	Dialect Dialect
	// Table is the key table's name, a plain identifier. Default:
	// DefaultTable ("idempotency_keys"). Migrate creates it.
	Table string
}

// Store keeps idempotency records in a database reached through
// database/sql. Create its table with Migrate.
type Store struct {
	db      *sql.DB
	dialect Dialect
	table   string
	sql     statements // built once, on the table
	keys
}

var _ store.Store = (*Store)(nil)

// New returns a Store on db. It fails when opts.Table is not an
// identifier.
func New(db *sql.DB, opts Config) (*Store, error) {
	table, err := keytable.Check(opts.Table)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	d := opts.Dialect.orDefault()
	s := &Store{db: db, dialect: d, table: table, sql: d.statements(table)}
	s.keys = keys{st: s, s: storeSession{s}}
	return s, nil
}

// DB returns the database the store runs on.
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the key table's name.
func (s *Store) Table() string { return s.table }

// translate turns a driver error into the store package's errors, once, at
// the store's boundary.
func (s *Store) translate(err error) error {
	if err == nil {
		return nil
	}
	switch s.dialect.classify(err) {
	case errLockTimeout:
		return errors.Join(store.ErrWaitTimeout, err)
	case errInFailedTx, errDeadlock:
		// A deadlock's victim is rolled back whole (InnoDB) or aborted
		// (PostgreSQL).
		return errors.Join(store.ErrTxAborted, err)
	}
	return err
}

// txOptions asks for READ COMMITTED whatever the database's default. Under
// REPEATABLE READ (InnoDB's default) a claim that waited for a holder
// would read its transaction's old snapshot after the holder committed,
// and InnoDB's gap locks would make concurrent claims deadlock; PostgreSQL
// would fail the waiter with a serialization error.
var txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// storeSession runs each of the Store's operations on its own: reads and
// fenced updates as single statements, claims in a READ COMMITTED
// transaction of their own with the wait bounded by DefaultMaxWait.
type storeSession struct{ s *Store }

func (ss storeSession) read(context.Context) (querier, error)  { return ss.s.db, nil }
func (ss storeSession) write(context.Context) (querier, error) { return ss.s.db, nil }

func (ss storeSession) bounded(ctx context.Context, fn func(q querier) (sql.Result, error)) (sql.Result, error) {
	s := ss.s
	for attempt := 0; ; attempt++ {
		res, err := s.own(ctx, fn)
		if err != nil && attempt < deadlockRetries && s.dialect.classify(err) == errDeadlock {
			continue
		}
		return res, s.translate(err)
	}
}

// own runs fn bounded in a transaction of its own.
func (s *Store) own(ctx context.Context, fn func(q querier) (sql.Result, error)) (sql.Result, error) {
	tx, err := s.db.BeginTx(ctx, txOptions)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	res, err := s.runBounded(ctx, tx, DefaultMaxWait, fn)
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return res, tx.Commit()
}

// runBounded runs fn on tx with the wait for locks bounded by wait, and
// gives the session its own setting back after.
func (s *Store) runBounded(ctx context.Context, tx *sql.Tx, wait time.Duration, fn func(q querier) (sql.Result, error)) (sql.Result, error) {
	if _, err := tx.ExecContext(ctx, s.dialect.lockWait(wait)); err != nil {
		return nil, err
	}
	res, err := fn(tx)
	// After a failure PostgreSQL's transaction is aborted (and its setting
	// goes with it); MySQL's session setting must still be put back.
	if _, rerr := tx.ExecContext(ctx, s.dialect.restoreLockWait); err == nil && rerr != nil {
		return nil, rerr
	}
	return res, err
}

// Begin returns a READ COMMITTED transaction that begins on its first
// statement, so a leased-mode handler that never touches the database
// holds no connection.
func (s *Store) Begin(_ context.Context, opts store.TxOptions) (store.Tx, error) {
	wait := opts.MaxWait
	if wait <= 0 {
		wait = DefaultMaxWait
	}
	t := &Tx{st: s, wait: wait}
	t.keys = keys{st: s, s: txSession{t}}
	return t, nil
}
