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

// KeyResolver is a Store on which an operator settles a completed record by
// hand, once they have found out what its request did where the middleware
// could not see: idem-gateway stores an upstream's unknown outcome as a
// COMPLETED record, so that no retry runs the request again silently, and
// its operator resolves it. The middleware never calls it.
//
// Release and ReplaceResponse are fenced on the record's state: they change
// the record only while it is COMPLETED and a.Token is the token of the
// attempt that completed it, and otherwise fail with ErrLeaseLost (the key
// is unused, a retry re-acquired it after its retention, or another
// operator released it first). A record in PROCESSING, whose attempt may
// still be running, is never touched.
type KeyResolver interface {
	Store
	// ListCompleted returns the keys of COMPLETED records whose stored
	// response has status code code, ordered by scope then key, starting
	// after the key after (the zero KeyRef: from the first), at most limit.
	// It may scan the table: it is for operators, not for the request path.
	ListCompleted(ctx context.Context, code int, after KeyRef, limit int) ([]KeyRef, error)
	// Release marks the record FAILED and drops its stored response: the
	// next retry of its key re-acquires it and runs afresh.
	Release(ctx context.Context, a Attempt) error
	// ReplaceResponse stores resp as the record's final response in place
	// of the one it has; every later retry gets resp.
	ReplaceResponse(ctx context.Context, a Attempt, resp Response) error
}
