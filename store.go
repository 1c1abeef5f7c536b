package idem

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
	// Token is the fencing token of this attempt: every later write to the
	// record names it, and fails once another attempt holds the key.
	Token string
	// LockFor is the lease length, added to the database clock.
	LockFor time.Duration
	// TTL is the retention, added to the database clock at creation.
	TTL time.Duration
}

// Lock names one attempt's hold on a record.
type Lock struct {
	Scope string
	Key   string
	Token string
}

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

// Record is an idempotency record as the store holds it. LockLive and
// Expired are judged by the store's clock (the database's now()), never the
// application's.
type Record struct {
	Scope         string
	Key           string
	Fingerprint   Fingerprint
	Status        Status
	Attempts      int
	LockToken     string
	LockedAt      time.Time
	LockExpiresAt time.Time
	LockLive      bool // lock_expires_at is still in the future
	Response      *Response
	CreatedAt     time.Time
	ExpiresAt     time.Time
	Expired       bool // past retention: the record no longer binds the key
}

// Keys are the operations on the key table. A Store runs each in its own
// transaction; a Tx runs them inside itself.
type Keys interface {
	// Get reads a record. It never writes. It returns ErrNotFound when the
	// key is unused.
	Get(ctx context.Context, scope, key string) (*Record, error)
	// Insert claims an unused key with one atomic insert, as PROCESSING and
	// locked by c.Token. When the key exists it inserts nothing and returns
	// the existing record with inserted false (a nil record means it vanished
	// between the two statements; try again). Inside a Tx, Insert waits for a
	// concurrent transaction that holds the key, at most TxOptions.LockWait,
	// and then fails with ErrWaitTimeout.
	Insert(ctx context.Context, c Claim) (rec *Record, inserted bool, err error)
	// Reacquire takes over a record that is FAILED, PROCESSING with an
	// expired lock, or COMPLETED and past retention, if prevToken still
	// holds it: one conditional update, which exactly one contender wins. A
	// live lock is never taken over, even past retention. Retention is
	// extended to at least TTL from now. It reports whether this one won.
	Reacquire(ctx context.Context, c Claim, prevToken string) (bool, error)
	// Complete stores the final response and marks the record COMPLETED if
	// l still holds it, else it fails with ErrLockLost.
	Complete(ctx context.Context, l Lock, resp Response) error
	// Fail marks the record FAILED and releases the lock if l still holds
	// it, else it fails with ErrLockLost.
	Fail(ctx context.Context, l Lock) error
	// Renew extends the lease to the database clock plus d if l still holds
	// it, else it fails with ErrLockLost.
	Renew(ctx context.Context, l Lock, d time.Duration) error
}

// Store is the durable home of idempotency records: pgstore for
// PostgreSQL, sqlitestore for an embedded database. Every store passes the
// conformance suite in package storetest.
type Store interface {
	Keys
	// Begin starts a READ COMMITTED transaction: the unit of work a handler
	// shares with the completion of its key.
	Begin(ctx context.Context, opts TxOptions) (Tx, error)
}

// TxOptions configures a transaction from Store.Begin.
type TxOptions struct {
	// LockWait bounds how long Insert and Reacquire inside the transaction
	// wait for another transaction that holds the same key. Zero means the
	// store's default bound, never an unbounded wait.
	LockWait time.Duration
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
}

// claimDeferringTx is a Tx that can claim a key at its completion instead
// of before the handler runs (Config.DeferClaim; pgstore). A store without
// it claims first, as without DeferClaim.
type claimDeferringTx interface {
	// DeferClaim holds the claim of c back until Complete (or
	// CompleteAndCommit), which then records the key as COMPLETED with its
	// response in one insert. When the key is already recorded, that insert
	// aborts the transaction, so nothing of it commits; a transaction that
	// holds the key is waited for at most TxOptions.LockWait. It reports
	// false, holding nothing back, when this transaction cannot.
	DeferClaim(c Claim) bool
	// ClaimResult reports whether the deferred claim has run and how: nil
	// when it recorded the key; ErrKeyExists when the key was recorded
	// already; ErrWaitTimeout when another transaction held it too long.
	ClaimResult(ctx context.Context) (ran bool, err error)
}
