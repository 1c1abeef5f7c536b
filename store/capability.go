package store

import "context"

// The optional capabilities of a store. The middleware asks for each by
// type assertion and does without it where a store lacks it; storetest
// runs the tests of each capability a store has.

// ClaimDeferrer is a Tx that can claim a key at its completion instead of
// before the handler runs (idem.Config.DeferClaim). Without it the
// middleware claims first.
type ClaimDeferrer interface {
	Tx
	// DeferClaim holds the claim of c back until Complete (or
	// CompleteAndCommit), which then records the key as COMPLETED with its
	// response in one insert. When the key is already recorded, that insert
	// aborts the transaction, so nothing of it commits; a transaction that
	// holds the key is waited for at most TxOptions.MaxWait. It reports
	// false, holding nothing back, when this transaction cannot.
	DeferClaim(c Claim) bool
	// DeferredClaimResult reports whether the deferred claim has run and how:
	// nil when it recorded the key; ErrKeyExists when the key was recorded
	// already; ErrWaitTimeout when another transaction held it too long.
	DeferredClaimResult() (ran bool, err error)
}

// CommitCompleter is a Tx that stores the final response and commits in one
// step, as Complete then Commit would (pgstore sends both in one round
// trip). Without it the middleware calls Complete, then Commit.
type CommitCompleter interface {
	Tx
	// CompleteAndCommit reports in completed whether the completion
	// succeeded (an error is then the commit's); after a failed completion
	// the transaction is still open.
	CompleteAndCommit(ctx context.Context, a Attempt, resp Response) (completed bool, err error)
}

// KeyRef names one record: a key in the scope of its user.
type KeyRef struct {
	Scope string
	Key   string
}

// ExpiredDeleter is a Store that can delete records past their retention.
// The middleware never calls it; package sweeper drives it in bounded,
// paced batches.
type ExpiredDeleter interface {
	Store
	// DeleteExpired deletes at most limit records whose expires_at has
	// passed by the store's clock, whatever their status, except a
	// PROCESSING record whose lease is still live: a request that runs past
	// retention keeps its key, as it would against a retry's re-acquire. It
	// runs as one short transaction, never waits for a record another
	// transaction holds (it leaves it for a later call), and returns the
	// keys it deleted. While another DeleteExpired holds the store's sweep
	// lock it deletes nothing and returns ErrSweepBusy.
	DeleteExpired(ctx context.Context, limit int) ([]KeyRef, error)
}
