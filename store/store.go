// Package store is the contract between the idem middleware and the
// databases that hold its idempotency records: what a store must do
// ([Store], [Tx], [Keys]), the values it keeps ([Record], [Claim],
// [Response]), the errors it answers with, and the [Capabilities] a store
// reports: the operations it serves beyond the claim and its completion.
// An operation a store lacks returns [ErrUnsupported]; a new store embeds
// [UnsupportedStore] and [UnsupportedTx] to start with every optional
// operation unsupported.
//
// Users of the middleware never import it: they hand a store (pgstore,
// sqlitestore) to idem.New. Authors of a new store implement it and run
// the conformance suite in package storetest.
//
// # Words
//
// A request takes its key with a claim. Its attempt is named by a fencing
// token: every later write to the record names the token and fails with
// [ErrNotHeld] once another attempt holds the key. In leased mode the
// claim commits at once and the attempt holds the key with a lease, which
// it renews; the lease ends at the record's lease expiry, judged by the
// database's clock. A transaction that finds the key held by another
// transaction waits for it at most [TxOptions.MaxWait].
package store

import (
	"context"
	"net/http"
	"time"
)

// Status is the state of an idempotency record.
type Status string

// The states of a record. A claim creates PROCESSING; a final response makes
// it COMPLETED; a retriable failure makes it FAILED, which a retry may
// re-acquire.
const (
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
	StatusFailed     Status = "FAILED"
)

// Fingerprint identifies the request a key was first used for. Hash is
// computed by the algorithm named by Version, so a record is always compared
// with the algorithm that made it.
type Fingerprint struct {
	Version int
	Method  string
	Path    string // the request path with its query string
	Hash    []byte // SHA-256
}

// Claim is what a request asks the store to record when it takes a key.
type Claim struct {
	Scope       string
	Key         string
	Fingerprint Fingerprint
	// Token is the fencing token of this attempt.
	Token string
	// Lease is how long the claim holds the key, added to the database
	// clock.
	Lease time.Duration
	// TTL is the retention, added to the database clock at creation.
	TTL time.Duration
}

// Attempt names one attempt's hold on a record: the key and the fencing
// token the attempt claimed it with.
type Attempt struct {
	Scope string
	Key   string
	Token string
}

// Attempt returns the attempt that c claims the key for.
func (c Claim) Attempt() Attempt { return Attempt{Scope: c.Scope, Key: c.Key, Token: c.Token} }

// Response is a stored final response.
type Response struct {
	StatusCode int
	Header     http.Header // only the replayable headers
	Body       []byte
	// ResourceType and ResourceID name the resource the response created,
	// where it names one (taken from its Location header).
	ResourceType string
	ResourceID   string
}

// Record is an idempotency record as the store holds it. LeaseLive and
// Expired are judged by the store's clock (the database's now()), never the
// application's.
type Record struct {
	Scope          string
	Key            string
	Fingerprint    Fingerprint
	Status         Status
	Attempts       int
	Token          string    // the fencing token of the attempt that last claimed the key
	ClaimedAt      time.Time // when that attempt claimed it
	LeaseExpiresAt time.Time
	LeaseLive      bool // LeaseExpiresAt is still in the future
	Response       *Response
	CreatedAt      time.Time
	ExpiresAt      time.Time
	Expired        bool // past retention: the record no longer binds the key
	// RecoveryPoint is the last recovery point committed (Keys.Advance), ""
	// for none. An unfinished record (a point, not COMPLETED) is never Expired.
	RecoveryPoint string
	// CompletedAt is when the record's final response was stored (Complete,
	// a deferred claim's insert, an operator's ReplaceResponse), by the
	// store's clock; zero while PROCESSING or FAILED, after an operator's
	// Release, and on a record completed before the store kept it.
	CompletedAt time.Time
}

// Keys are the operations on the key table. A Store runs each in its own
// transaction; a Tx runs them inside itself.
type Keys interface {
	// Get reads a record. It never writes. It returns ErrNotFound when the
	// key is unused.
	Get(ctx context.Context, scope, key string) (*Record, error)
	// Insert claims an unused key with one atomic insert, as PROCESSING
	// with c.Token. When the key exists it inserts nothing and returns the
	// existing record with inserted false (a nil record means it vanished
	// between the two statements; try again). Inside a Tx, Insert waits for
	// a concurrent transaction that holds the key, at most
	// TxOptions.MaxWait, and then fails with ErrWaitTimeout.
	Insert(ctx context.Context, c Claim) (rec *Record, inserted bool, err error)
	// Reacquire takes over a record that is FAILED, PROCESSING with an
	// expired lease, or COMPLETED and past retention, if prevToken still
	// holds it: one conditional update, which exactly one contender wins. A
	// live lease is never taken over, even past retention. Retention is
	// extended to at least TTL from now. It reports whether this one won.
	Reacquire(ctx context.Context, c Claim, prevToken string) (bool, error)
	// Complete stores the final response and marks the record COMPLETED if
	// a still holds it, else it fails with ErrNotHeld.
	Complete(ctx context.Context, a Attempt, resp Response) error
	// Fail marks the record FAILED and ends its lease if a still holds it,
	// else it fails with ErrNotHeld.
	Fail(ctx context.Context, a Attempt) error
	// Renew extends the lease to the database clock plus d if a still holds
	// it, else it fails with ErrNotHeld.
	Renew(ctx context.Context, a Attempt, d time.Duration) error

	// Recovery points (Capabilities.RecoveryPoints; idem.Advance): a
	// handler split into phases, each committing its writes with the point
	// it reached, so that a retry or a completer resumes there.
	// model/payout.pml is the design both must follow. A record with a
	// point that is not COMPLETED is unfinished: its phases moved
	// something (money, say) that only finishing it settles. The store
	// keeps it whole: it binds its key past retention (Record.Expired stays
	// false), DeleteExpired skips it, and Reacquire resumes it, keeping its
	// Progress, rather than starting a new life. A COMPLETED record
	// re-acquired past retention starts a new life with no point and no
	// provider keys.

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

// Store is the durable home of idempotency records. Beside the key
// operations every store serves, it reports in Capabilities the
// operations it serves beyond them; each of the others returns an error
// wrapping ErrUnsupported. The middleware never calls the sweep's, the
// completer's or the operator's operations.
type Store interface {
	Keys
	// Begin starts a READ COMMITTED transaction: the unit of work a handler
	// shares with the completion of its key.
	Begin(ctx context.Context, opts TxOptions) (Tx, error)
	// Capabilities reports what the store serves. It is the same for the
	// life of the store: the middleware reads it once, in idem.New.
	Capabilities() Capabilities

	// DeleteExpired (Capabilities.Sweep; package sweeper drives it in
	// bounded, paced batches) deletes at most limit records whose
	// expires_at has passed by the store's clock, whatever their status,
	// except a PROCESSING record whose lease is still live (a request that
	// runs past retention keeps its key, as it would against a retry's
	// re-acquire), an unfinished record, and a record that AwaitsOperator,
	// until an operator settles it. It runs as one short transaction,
	// never waits for a record another transaction holds (it leaves it for
	// a later call), and returns the keys it deleted. While another
	// DeleteExpired holds the store's sweep lock it deletes nothing and
	// returns ErrSweepBusy.
	DeleteExpired(ctx context.Context, limit int) ([]KeyRef, error)

	// FindUnfinished (Capabilities.Unfinished; package completer drives
	// it) returns at most limit abandoned unfinished records (a recovery
	// point, not COMPLETED, and no live hold: FAILED, or PROCESSING with
	// its lease run out), those held longest ago first. It writes nothing.
	FindUnfinished(ctx context.Context, limit int) ([]Unfinished, error)
	// ResumeUnfinished (Capabilities.Unfinished) takes the record of c's
	// key over for c, in one statement fenced by prevToken
	// (Unfinished.Token): it wins only while the record is still the
	// abandoned unfinished one that token last held, and keeps its
	// fingerprint, life, recovery point and provider keys. It never claims
	// a key afresh nor starts a new life: a record finished, re-acquired or
	// swept since it was listed is left alone (false).
	ResumeUnfinished(ctx context.Context, c Claim, prevToken string) (bool, error)

	// Resolving (Capabilities.Resolve): an operator settles a completed
	// record by hand, once they have found out what its request did where
	// the middleware could not see (idem-gateway stores an upstream's
	// unknown outcome as a COMPLETED record, which its operator resolves).
	// Release and ReplaceResponse are fenced on the record's state: they
	// change the record only while it is COMPLETED and a.Token is the token
	// of the attempt that completed it, and otherwise fail with ErrNotHeld.
	// A record in PROCESSING, whose attempt may still be running, is never
	// touched.

	// ListCompleted returns the keys of COMPLETED records whose stored
	// response has status code code, ordered by scope then key, starting
	// after the key after (the zero KeyRef: from the first), at most limit.
	// It may scan the table.
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

	// The operator's search (Capabilities.Search: the console's listing).
	// Each search is served by an index of the key table: by key, by scope
	// (the primary key), by status and age, and unfinished records;
	// docs/console.md names them.

	// ListKeys returns at most q.Limit records matching q, newest first
	// (unfinished ones: held longest ago first).
	ListKeys(ctx context.Context, q KeyQuery) ([]Record, error)
	// CountKeys counts the records by state. Large counts may be estimates.
	CountKeys(ctx context.Context) (KeyCounts, error)
	// ProviderKeys returns the downstream keys recorded on a record
	// (Advance), by provider; ErrNotFound when it has no record.
	ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error)

	// The audit log (Capabilities.AuditLog): a durable log of operator
	// actions next to the key table.

	// AppendAudit records e, stamped with the store's clock.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns the latest entries, newest first, at most limit:
	// every key's, or only ref's when ref is not the zero KeyRef.
	ListAudit(ctx context.Context, ref KeyRef, limit int) ([]AuditEntry, error)
	// BeginAudit returns a transaction in which an operator's action and
	// its audit entry commit together, or neither does.
	BeginAudit(ctx context.Context) (AuditTx, error)
}

// TxOptions configures a transaction from Store.Begin.
type TxOptions struct {
	// MaxWait bounds how long Insert and Reacquire inside the transaction
	// wait for another transaction that holds the same key. Zero means the
	// store's default bound, never an unbounded wait.
	MaxWait time.Duration
	// LockKey, when its Key is set, is a key the transaction locks before
	// its first statement and holds until it ends (Capabilities.KeyLock):
	// another transaction's lock of the same key waits for it, at most
	// its own MaxWait, then fails with ErrWaitTimeout. The lock is the
	// claim of a claim-first request that writes its record only at the
	// completion; a read in the transaction after it sees every record
	// committed before the lock was granted. A claim deferred (DeferClaim)
	// before the transaction's first statement is checked under the lock
	// when it is granted: a recorded key fails it there, as a wait that
	// ran out does (DeferredClaimResult), and fails that statement with
	// it, so that the handler's statements never run under a key another
	// request recorded. A store without the capability ignores it.
	LockKey KeyRef
}

// Tx is a store transaction. The middleware commits it; the handler reaches
// it through the store package's context accessor (pgstore.DB, say), never
// through this interface.
type Tx interface {
	Keys
	// Context returns a copy of ctx that carries the transaction for the
	// store package's context accessor.
	Context(ctx context.Context) context.Context
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// CompleteAndCommit stores the final response and commits, as Complete
	// then Commit would (CompleteThenCommit), or in one step where the
	// store can (Capabilities.OneStepCommit: pgstore sends both in one
	// round trip). It reports in completed whether the completion
	// succeeded (an error is then the commit's); after a failed completion
	// the transaction is still open.
	CompleteAndCommit(ctx context.Context, a Attempt, resp Response) (completed bool, err error)

	// The deferred claim (Capabilities.DeferredClaim;
	// idem.ModeAtomicDeferred).

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
