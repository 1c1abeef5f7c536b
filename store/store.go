// Package store is the contract between the idem middleware and the
// databases that hold its idempotency records: what a store must do
// ([Store], [Tx], [Keys]), the values it keeps ([Record], [Claim],
// [Response]), the errors it answers with, and the optional capabilities a
// store may add ([ClaimDeferrer], [CommitCompleter], [ExpiredDeleter],
// [KeyResolver], [Advancer], [UnfinishedFinder], and for operators
// [KeyLister] and [AuditLog]).
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
	// RecoveryPoint is the last recovery point committed (Advancer), "" for
	// none. An unfinished record (a point, not COMPLETED) is never Expired.
	RecoveryPoint string
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
}

// Store is the durable home of idempotency records.
type Store interface {
	Keys
	// Begin starts a READ COMMITTED transaction: the unit of work a handler
	// shares with the completion of its key.
	Begin(ctx context.Context, opts TxOptions) (Tx, error)
}

// TxOptions configures a transaction from Store.Begin.
type TxOptions struct {
	// MaxWait bounds how long Insert and Reacquire inside the transaction
	// wait for another transaction that holds the same key. Zero means the
	// store's default bound, never an unbounded wait.
	MaxWait time.Duration
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
