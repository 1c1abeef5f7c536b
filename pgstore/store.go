package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxWait bounds a wait on a key another transaction holds when
// TxOptions.MaxWait is zero, and always for statements outside a
// transaction.
const DefaultMaxWait = 5 * time.Second

// Store keeps idempotency records in PostgreSQL. Its table lives in the
// schema the pool's search_path names; create it with Migrate.
type Store struct {
	pool  *pgxpool.Pool
	sweep *sweepTargets
	keys
}

var _ store.Store = (*Store)(nil)

// Config configures a Store.
type Config struct {
	// Table is the key table's name, a plain identifier, in the pool's
	// search_path schema. Default: "idempotency_keys". MigrateTable
	// creates it.
	Table string
}

// New returns a Store on pool, on the default key table.
func New(pool *pgxpool.Pool) *Store {
	s, _ := NewWithConfig(pool, Config{}) // the default table is valid
	return s
}

// NewWithConfig returns a Store on pool configured by opts. It fails when
// opts.Table is not an identifier.
func NewWithConfig(pool *pgxpool.Pool, opts Config) (*Store, error) {
	table, err := keytable.Check(opts.Table)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return &Store{pool: pool, sweep: &sweepTargets{}, keys: keys{db: autocommit{pool}, sql: newStatements(table), lockWait: DefaultMaxWait}}, nil
}

// Capabilities reports every capability: the store serves them all, and
// its transactions complete and commit in one round trip.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{DeferredClaim: true, OneStepCommit: true, RecoveryPoints: true, Unfinished: true, Sweep: true, Search: true, Resolve: true, AuditLog: true}
}

// Pool returns the pool the store runs on.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Begin returns a READ COMMITTED transaction that begins on its first
// statement.
func (s *Store) Begin(_ context.Context, opts store.TxOptions) (store.Tx, error) {
	wait := opts.MaxWait
	if wait <= 0 {
		wait = DefaultMaxWait
	}
	t := &Tx{pool: s.pool}
	t.keys = keys{db: lazy{t}, sql: s.sql, lockWait: wait}
	return t, nil
}
