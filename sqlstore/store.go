package sqlstore

import (
	"context"
	"database/sql"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/store"
)

// DefaultMaxWait bounds a wait on a key another transaction holds when
// TxOptions.MaxWait is zero, and always for the Store's own operations.
const DefaultMaxWait = engine.DefaultMaxWait

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
//
// It serves every capability of store.Capabilities, as pgstore does, but
// the one-step completion and commit.
type Store struct {
	*engineT
	keys
}

// The engine's types, embedded unexported.
type (
	engineT = engine.Engine
	keys    = engine.Keys
	txT     = engine.Tx
)

var (
	_ store.Store   = (*Store)(nil)
	_ store.AuditTx = (*Tx)(nil)
)

// New returns a Store on db. It fails when opts.Table is not an
// identifier.
func New(db *sql.DB, opts Config) (*Store, error) {
	e, err := engine.New(engine.Config{Name: "sqlstore", DB: db, Dialect: opts.Dialect.engine(), Table: opts.Table})
	if err != nil {
		return nil, err
	}
	return &Store{engineT: e, keys: engine.StoreKeys(e)}, nil
}

// Capabilities reports every capability but the one-step completion and
// commit.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{DeferredClaim: true, RecoveryPoints: true, Unfinished: true, Sweep: true, Search: true, Resolve: true, AuditLog: true}
}

// Tx is a transaction of the store: a *sql.Tx at READ COMMITTED, begun on
// its first statement. The handler reaches it through DB.
type Tx struct{ *txT }

// Begin returns a READ COMMITTED transaction that begins on its first
// statement, so a leased-mode handler that never touches the database
// holds no connection.
func (s *Store) Begin(_ context.Context, opts store.TxOptions) (store.Tx, error) {
	return &Tx{engine.Begin(s.engineT, opts)}, nil
}

// BeginAudit returns a transaction for an operator's action and its audit
// entry (see store.Store.BeginAudit).
func (s *Store) BeginAudit(context.Context) (store.AuditTx, error) {
	return &Tx{engine.Begin(s.engineT, store.TxOptions{})}, nil
}
