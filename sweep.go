package idem

import (
	"context"
	"errors"
)

// KeyRef names one record: a key in the scope of its user.
type KeyRef struct {
	Scope string
	Key   string
}

// ErrSweepBusy: another process holds the store's sweep lock, so this one
// deleted nothing. It is not a failure; try again later.
var ErrSweepBusy = errors.New("idem: another sweep is running")

// Sweeper is the capability of a store to delete records past their
// retention. It is optional: a Store need not have it, and the middleware
// never calls it. Package sweeper drives it in bounded, paced batches;
// pgstore and sqlitestore implement it.
type Sweeper interface {
	// DeleteExpired deletes at most limit records whose expires_at has
	// passed by the store's clock, whatever their status, except a
	// PROCESSING record whose lock is still live: a request that runs past
	// retention keeps its key, as it would against a retry's re-acquire. An
	// abandoned PROCESSING record (its lock expired) goes. It runs as one
	// short transaction and returns the keys it deleted. It never waits for
	// a record that another transaction holds (a request re-acquiring an
	// expired key): it leaves it for a later call. While another DeleteExpired holds the store's
	// sweep lock it deletes nothing and returns ErrSweepBusy, so replicas
	// that all sweep do not compete. (A store whose writers lock the whole
	// database, SQLite, says ErrSweepBusy too when it cannot have that lock
	// promptly.)
	//
	// inTx, when not nil, runs inside that transaction after the delete,
	// only when something was deleted, with the deleted keys and a context
	// that carries the transaction for the store package's context accessor
	// (pgstore.DB, sqlitestore.DB). An application releases its own per-key
	// state there (the unique key of a business row, say), so that it goes
	// with the record or not at all. An error from inTx rolls the batch back
	// and is returned; keep inTx short, the batch's row locks are held while
	// it runs.
	DeleteExpired(ctx context.Context, limit int, inTx func(ctx context.Context, deleted []KeyRef) error) ([]KeyRef, error)
}
