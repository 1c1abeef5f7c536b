package pgstore

import (
	"context"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxWait bounds a wait on a key another transaction holds when
// TxOptions.MaxWait is zero, and always for statements outside a
// transaction.
const DefaultMaxWait = engine.DefaultMaxWait

// Store keeps idempotency records in PostgreSQL. Its table lives in the
// schema the pool's search_path names; create it with Migrate.
type Store struct {
	e     *engine.Engine
	pool  *pgxpool.Pool
	sql   *statements // the store's own, on its table
	sweep *sweepTargets
	keys
}

// keys are the engine's key operations, embedded unexported.
type keys = engine.Keys

var (
	_ store.Store   = (*Store)(nil)
	_ store.AuditTx = (*Tx)(nil)
)

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
	e, err := engine.New(engine.Config{Name: "pgstore", Pool: executor[autocommit]{autocommit{pool}}, Dialect: dialect, Table: opts.Table})
	if err != nil {
		return nil, err
	}
	return &Store{e: e, pool: pool, sql: newStatements(e.Table()), sweep: &sweepTargets{},
		keys: engine.NewKeys(e, session[autocommit]{autocommit{pool}})}, nil
}

// Capabilities reports every capability: the store serves them all, and
// its transactions complete and commit in one round trip.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{DeferredClaim: true, KeyLock: true, OneStepCommit: true, RecoveryPoints: true, Unfinished: true, Sweep: true, Search: true, Resolve: true, AuditLog: true}
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
	t := &Tx{s: s, wait: wait}
	t.keys = engine.NewKeys(s.e, session[lazy]{lazy{t}})
	if k := opts.LockKey; k.Key != "" {
		t.queueLockKey(k)
	}
	return t, nil
}

// The operator's reads and the completer's search are the engine's, on
// the pool.

// ListKeys searches the key table for an operator (see store.Store).
func (s *Store) ListKeys(ctx context.Context, q store.KeyQuery) ([]store.Record, error) {
	return s.e.ListKeys(ctx, q)
}

// ProviderKeys reads the downstream keys recorded on a record (see
// store.Store).
func (s *Store) ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error) {
	return s.e.ProviderKeys(ctx, scope, key)
}

// ListCompleted lists the keys of COMPLETED records whose response has
// status code code (see store.Store).
func (s *Store) ListCompleted(ctx context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	return s.e.ListCompleted(ctx, code, after, limit)
}

// ListAudit returns the latest operator actions (see store.Store).
func (s *Store) ListAudit(ctx context.Context, ref store.KeyRef, limit int) ([]store.AuditEntry, error) {
	return s.e.ListAudit(ctx, ref, limit)
}

// FindUnfinished lists abandoned unfinished records (see store.Store).
func (s *Store) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	return s.e.FindUnfinished(ctx, limit)
}
