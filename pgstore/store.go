package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
)

// DefaultLockWait bounds a wait on a key another transaction holds when
// TxOptions.LockWait is zero, and always for statements outside a
// transaction.
const DefaultLockWait = 5 * time.Second

// Store keeps idempotency records in PostgreSQL. Its table lives in the
// schema the pool's search_path names; create it with Migrate.
type Store struct {
	pool *pgxpool.Pool
	keys
}

var _ idem.Store = (*Store)(nil)

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, keys: keys{db: pool, lockWait: DefaultLockWait}}
}

// Pool returns the pool the store runs on.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Begin starts a READ COMMITTED transaction, whatever the database's
// default: under REPEATABLE READ an atomic-mode duplicate's claim would fail
// with a serialization error instead of waiting and replaying.
func (s *Store) Begin(ctx context.Context, opts idem.TxOptions) (idem.Tx, error) {
	t, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", translate(err))
	}
	wait := opts.LockWait
	if wait <= 0 {
		wait = DefaultLockWait
	}
	return &Tx{tx: t, keys: keys{db: t, lockWait: wait}}, nil
}

// Tx is a transaction of the store. The handler reaches it through DB.
type Tx struct {
	tx pgx.Tx
	keys
}

var _ idem.Tx = (*Tx)(nil)

// Context returns a copy of ctx carrying the transaction for DB.
func (t *Tx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, ambient{t.tx})
}

// Commit commits the transaction. An error on a transaction that a failed
// statement aborted is ErrTxAborted.
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return fmt.Errorf("commit: %w", errors.Join(idem.ErrTxAborted, err))
		}
		return fmt.Errorf("commit: %w", translate(err))
	}
	return nil
}

// Rollback rolls the transaction back; after a Commit it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}
