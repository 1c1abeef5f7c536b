package store

import (
	"bytes"
	"context"
	"time"
)

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
	// retention keeps its key, as it would against a retry's re-acquire;
	// an unfinished record (Advancer); and a COMPLETED record that holds
	// the outcome-unknown answer (AwaitsOperator), until an operator
	// settles it (KeyResolver). It
	// runs as one short transaction, never waits for a record another
	// transaction holds (it leaves it for a later call), and returns the
	// keys it deleted. While another DeleteExpired holds the store's sweep
	// lock it deletes nothing and returns ErrSweepBusy.
	DeleteExpired(ctx context.Context, limit int) ([]KeyRef, error)
}

// OutcomeUnknownType is the type of idem-gateway's outcome-unknown problem
// (docs/problems.md): its request reached the upstream and no answer came
// back, and no retry may send it again until an operator has found out
// what the upstream did.
const OutcomeUnknownType = "https://github.com/idem-dev/idem/blob/main/docs/problems.md#outcome-unknown"

// AwaitsOperator reports whether a record holds the outcome-unknown answer:
// a COMPLETED record answered 409 whose body names OutcomeUnknownType, as
// a JSON string. Only an operator settles it (KeyResolver): no
// ExpiredDeleter deletes it, whatever its expiry. The stores' SQL tests
// the same bytes.
func AwaitsOperator(status Status, resp *Response) bool {
	return status == StatusCompleted && resp != nil && resp.StatusCode == 409 &&
		bytes.Contains(resp.Body, []byte(`"`+OutcomeUnknownType+`"`))
}

// KeyResolver is a Store on which an operator settles a completed record by
// hand, once they have found out what its request did where the middleware
// could not see: idem-gateway stores an upstream's unknown outcome as a
// COMPLETED record, so that no retry runs the request again silently, and
// its operator resolves it. The middleware never calls it.
//
// Release and ReplaceResponse are fenced on the record's state: they change
// the record only while it is COMPLETED and a.Token is the token of the
// attempt that completed it, and otherwise fail with ErrNotHeld (the key
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
	// of the one it has; every later retry gets resp. It binds the key for
	// the record's retention (its expiry less its last claim) again, counted
	// from now: an answer recorded past the record's expiry is replayed, not
	// run again.
	ReplaceResponse(ctx context.Context, a Attempt, resp Response) error
}

// Progress is where a record's operation stands: its recovery point and the
// life of the record it belongs to.
type Progress struct {
	// Point is the last recovery point committed, "" before the first.
	Point string
	// Life is the record's CreatedAt: it changes only when the record
	// starts a new life (a key reused after retention), so a downstream key
	// derived from it is the same across the retries of one operation and
	// new for the next.
	Life time.Time
	// ProviderKeys are the downstream keys recorded with a recovery point
	// (Advancer.Advance), by provider; empty before the first.
	ProviderKeys map[string]string
}

// Advancer is a Store, and its Tx, that keeps a recovery point on a record
// (idem.Advance): a handler split into phases, each committing its writes
// with the point it reached, so that a retry or a completer resumes there.
// model/payout.pml is the design both must follow.
//
// A record with a recovery point that is not COMPLETED is unfinished: its
// phases moved something (money, say) that only finishing it settles. A
// Advancer therefore keeps it whole: it binds its key past retention
// (Record.Expired stays false), DeleteExpired skips it, and Reacquire
// resumes it, keeping its Progress (point, life and provider keys), rather
// than starting a new life. A COMPLETED record re-acquired past retention
// starts a new life with no point and no provider keys.
type Advancer interface {
	Keys
	// Progress reads the recovery point and the record's life in one
	// statement fenced by a's token: ErrNotHeld when a no longer holds
	// the key. An attempt that lost its hold must never act on a later
	// attempt's point.
	Progress(ctx context.Context, a Attempt) (Progress, error)
	// Advance sets the recovery point, fenced by a's token (ErrNotHeld
	// otherwise), and records keys, by provider, in the same statement: a
	// provider's key recorded before is kept, never replaced. In a Tx it
	// commits with the transaction's other writes. point must not be
	// empty: no attempt may set a record back to "nothing happened".
	Advance(ctx context.Context, a Attempt, point string, keys map[string]string) error
}

// Unfinished is an unfinished record as UnfinishedFinder lists it.
type Unfinished struct {
	KeyRef
	Fingerprint Fingerprint
	Point       string
	// Token is the fencing token of the attempt that last held it.
	Token string
}

// UnfinishedFinder is a Store that lists abandoned unfinished records: a
// recovery point, not COMPLETED, and no live hold (FAILED, or PROCESSING
// with its lease run out), and takes over one as it was listed. Package
// completer drives it.
type UnfinishedFinder interface {
	Store
	// FindUnfinished returns at most limit abandoned unfinished records,
	// those held longest ago first. It writes nothing.
	FindUnfinished(ctx context.Context, limit int) ([]Unfinished, error)
	// ResumeUnfinished takes the record of c's key over for c, in one
	// statement fenced by prevToken (Unfinished.Token): it wins only while
	// the record is still the abandoned unfinished one that token last
	// held, and keeps its fingerprint, life, recovery point and provider
	// keys. It never claims a key afresh nor starts a new life: a record
	// finished, re-acquired or swept since it was listed is left alone
	// (false).
	ResumeUnfinished(ctx context.Context, c Claim, prevToken string) (bool, error)
}
