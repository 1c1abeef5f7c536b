package pgstore

import (
	"context"
	"time"

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
	pool *pgxpool.Pool
	keys
}

var _ store.Store = (*Store)(nil)

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, keys: keys{db: autocommit{pool}, lockWait: DefaultMaxWait}}
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
	t.keys = keys{db: lazy{t}, lockWait: wait}
	return t, nil
}
