package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/store"
)

// DefaultMaxWait bounds a wait for the database's write lock when
// TxOptions.MaxWait is zero, and always for the Store's own operations
// (Insert, Reacquire, Complete, Fail, Renew), each of which runs in a
// transaction of its own.
const DefaultMaxWait = 5 * time.Second

// Store keeps idempotency records in a SQLite database. Open the database
// with Open and create the table with Migrate.
//
// It serves every capability of store.Capabilities but the deferred claim
// and the one-step completion and commit; its claim takes the database's
// write lock (store.Capabilities.ClaimLocksStore). The operator's reads run
// without the write lock.
type Store struct {
	*engineT
	keys
	// gate holds a token while one of the store's transactions holds the
	// write lock: the store's writers queue on it, in order, instead of
	// polling SQLite's lock.
	gate chan struct{}
}

// The engine's types, embedded unexported.
type (
	engineT = engine.Engine
	keys    = engine.Keys
)

var (
	_ store.Store   = (*Store)(nil)
	_ store.AuditTx = (*Tx)(nil)
)

// New returns a Store on db, which should come from Open: the store needs
// WAL mode, so that reads go on while a transaction holds the write lock.
// Make one Store per database file and share it: its transactions queue in
// the order they ask for the write lock. Two Stores on one file (or two
// processes) still exclude each other through SQLite's lock, but find it
// free only by polling.
func New(db *sql.DB) *Store {
	s, _ := NewWithConfig(db, Config{}) // the default table is valid
	return s
}

// Config configures a Store.
type Config struct {
	// Table is the key table's name, a plain identifier. Default:
	// "idempotency_keys". MigrateTable creates it.
	Table string
}

// NewWithConfig is New configured by opts. It fails when opts.Table is
// not an identifier.
func NewWithConfig(db *sql.DB, opts Config) (*Store, error) {
	s := &Store{gate: make(chan struct{}, 1)}
	e, err := engine.New(engine.Config{Name: "sqlitestore", DB: db, Dialect: dialect, Table: opts.Table, Sweep: s.sweep})
	if err != nil {
		return nil, err
	}
	s.engineT = e
	s.keys = engine.NewKeys(e, storeSession{s})
	return s, nil
}

// Capabilities reports every capability but the deferred claim, which the
// write lock a transaction takes at its first statement would gain nothing
// from, and the one-step completion and commit; and that a claim takes the
// database's write lock.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{RecoveryPoints: true, Unfinished: true, Sweep: true, Search: true, Resolve: true, AuditLog: true, ClaimLocksStore: true}
}

// storeSession runs each of the Store's key operations on its own: a read
// on the pool, a write in a transaction of its own. Begin takes the
// operation's one reading of the clock, once the write lock is held; every
// time the operation stores or compares is derived from it.
type storeSession struct{ s *Store }

func (ss storeSession) Begin(ctx context.Context, op engine.Op) (engine.Executor, time.Time, error) {
	if op == engine.OpRead {
		return engine.SQL(ss.s.DB()), time.Now(), nil
	}
	// A write, and a claim (the write lock bounds every wait), in a
	// transaction of its own.
	t := ss.s.newTx(DefaultMaxWait)
	c, err := t.begin(ctx)
	if err != nil {
		t.rollback(ctx)
		return nil, time.Time{}, err
	}
	return ownTx{engine.SQL(c), t}, time.Now(), nil
}

func (ss storeSession) End(ctx context.Context, op engine.Op, q engine.Executor, err error) (bool, error) {
	if op == engine.OpRead {
		return false, translate(err)
	}
	t := q.(ownTx).t
	if err != nil {
		err = t.Explain(err) // it reads the transaction's state: first
		t.rollback(ctx)
		return false, err
	}
	return false, t.commit(ctx)
}

// ownTx is the transaction of one of the Store's own writes, as the
// engine runs its statements on it.
type ownTx struct {
	engine.Executor
	t *writeTx
}

// Begin returns a transaction: the unit of work a handler shares with the
// completion of its key. It holds nothing until its first statement, which
// takes the database's write lock (BEGIN IMMEDIATE), waiting at most
// opts.MaxWait (zero: DefaultMaxWait) and then failing with
// store.ErrWaitTimeout; from then on it holds the lock until Commit or
// Rollback. That is what makes an atomic-mode duplicate wait for the
// request it repeats and then see its outcome.
func (s *Store) Begin(ctx context.Context, opts store.TxOptions) (store.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	wait := opts.MaxWait
	if wait <= 0 {
		wait = DefaultMaxWait
	}
	t := s.newTx(wait)
	return &Tx{w: t, keys: engine.NewKeys(s.engineT, t)}, nil
}

// BeginAudit returns a transaction for an operator's action and its audit
// entry (see store.Store.BeginAudit): it takes the write lock on its first
// statement.
func (s *Store) BeginAudit(ctx context.Context) (store.AuditTx, error) {
	tx, err := s.Begin(ctx, store.TxOptions{})
	if err != nil {
		return nil, err
	}
	return tx.(*Tx), nil
}

// Tx is a transaction of the store. The handler reaches it through DB.
type Tx struct {
	w *writeTx
	keys
}

// Context returns a copy of ctx carrying the transaction for DB.
func (t *Tx) Context(ctx context.Context) context.Context {
	return engine.WithHandle(ctx, t.w)
}

// Commit commits the transaction. A transaction that SQLite rolled back on
// its own (an interrupted statement, say) is store.ErrTxAborted.
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.w.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback rolls the transaction back; after a Commit it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	t.w.rollback(ctx)
	return nil
}

// CompleteAndCommit is Complete, then Commit.
func (t *Tx) CompleteAndCommit(ctx context.Context, a store.Attempt, resp store.Response) (bool, error) {
	return store.CompleteThenCommit(ctx, t, a, resp)
}

// DeferClaim holds nothing back: the store cannot defer a claim.
func (t *Tx) DeferClaim(store.Claim) bool { return false }

// DeferredClaimResult reports that no deferred claim ran.
func (t *Tx) DeferredClaimResult() (ran bool, err error) { return false, nil }
