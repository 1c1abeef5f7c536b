package store

import (
	"bytes"
	"context"
	"fmt"
	"time"
)

// Capabilities are what a store serves beyond the key operations, the
// transaction and its completion, as the store reports them once
// (Store.Capabilities). Each operation a field names returns an error
// wrapping ErrUnsupported when the field is false; storetest checks both.
type Capabilities struct {
	// DeferredClaim: Tx.DeferClaim holds a claim back until the
	// completion (idem.ModeAtomicDeferred, which idem.New refuses
	// without it).
	DeferredClaim bool
	// OneStepCommit: Tx.CompleteAndCommit completes and commits in one
	// round trip rather than two.
	OneStepCommit bool
	// RecoveryPoints: Keys.Progress and Keys.Advance, on the Store and in
	// its transactions (idem.Advance).
	RecoveryPoints bool
	// Unfinished: FindUnfinished and ResumeUnfinished (package completer).
	Unfinished bool
	// Sweep: DeleteExpired (package sweeper).
	Sweep bool
	// Search: the operator's ListKeys, CountKeys and ProviderKeys.
	Search bool
	// Resolve: ListCompleted, Release and ReplaceResponse.
	Resolve bool
	// AuditLog: AppendAudit, ListAudit and BeginAudit.
	AuditLog bool
	// ClaimLocksStore: a claim takes the store's write lock, which every
	// other writer then waits for (SQLite), while a read takes none. The
	// middleware then reads a key before claiming it even when the replay
	// cache misses, so that a retry it has not cached reads beside the
	// writers instead of queueing behind them.
	ClaimLocksStore bool
	// KeyLock: Begin takes TxOptions.LockKey's lock, so that a
	// claim-first request (idem.ModeAtomic) claims the key with the lock
	// alone and records it once, born COMPLETED, at the completion, as a
	// deferred claim does (DeferredClaim is needed with it).
	KeyLock bool
}

// unsupported is the error of an operation the store lacks: op names it,
// and what says which capability serves it.
func unsupported(op, what string) error {
	return fmt.Errorf("%s (%s): %w", op, what, ErrUnsupported)
}

// UnsupportedStore serves each operation of Store that Capabilities
// names, each returning ErrUnsupported, and reports no capabilities: a new
// store embeds it, implements the key operations and Begin, and then
// replaces what it serves, one capability at a time (its own
// Capabilities method reporting each).
type UnsupportedStore struct{}

func (UnsupportedStore) Capabilities() Capabilities { return Capabilities{} }

func (UnsupportedStore) Progress(context.Context, Attempt) (Progress, error) {
	return Progress{}, unsupported("Progress", "recovery points")
}

func (UnsupportedStore) Advance(context.Context, Attempt, string, map[string]string) error {
	return unsupported("Advance", "recovery points")
}

func (UnsupportedStore) DeleteExpired(context.Context, int) ([]KeyRef, error) {
	return nil, unsupported("DeleteExpired", "sweep")
}

func (UnsupportedStore) FindUnfinished(context.Context, int) ([]Unfinished, error) {
	return nil, unsupported("FindUnfinished", "unfinished search")
}

func (UnsupportedStore) ResumeUnfinished(context.Context, Claim, string) (bool, error) {
	return false, unsupported("ResumeUnfinished", "unfinished search")
}

func (UnsupportedStore) ListCompleted(context.Context, int, KeyRef, int) ([]KeyRef, error) {
	return nil, unsupported("ListCompleted", "resolve")
}

func (UnsupportedStore) Release(context.Context, Attempt) error {
	return unsupported("Release", "resolve")
}

func (UnsupportedStore) ReplaceResponse(context.Context, Attempt, Response) error {
	return unsupported("ReplaceResponse", "resolve")
}

func (UnsupportedStore) ListKeys(context.Context, KeyQuery) ([]Record, error) {
	return nil, unsupported("ListKeys", "search")
}

func (UnsupportedStore) CountKeys(context.Context) (KeyCounts, error) {
	return KeyCounts{}, unsupported("CountKeys", "search")
}

func (UnsupportedStore) ProviderKeys(context.Context, string, string) (map[string]string, error) {
	return nil, unsupported("ProviderKeys", "search")
}

func (UnsupportedStore) AppendAudit(context.Context, AuditEntry) error {
	return unsupported("AppendAudit", "audit log")
}

func (UnsupportedStore) ListAudit(context.Context, KeyRef, int) ([]AuditEntry, error) {
	return nil, unsupported("ListAudit", "audit log")
}

func (UnsupportedStore) BeginAudit(context.Context) (AuditTx, error) {
	return nil, unsupported("BeginAudit", "audit log")
}

// UnsupportedTx is UnsupportedStore's counterpart for a Tx: recovery
// points return ErrUnsupported and DeferClaim holds nothing back. A Tx
// that embeds it still implements CompleteAndCommit, with
// CompleteThenCommit where it has no one-step form.
type UnsupportedTx struct{}

func (UnsupportedTx) Progress(context.Context, Attempt) (Progress, error) {
	return Progress{}, unsupported("Progress", "recovery points")
}

func (UnsupportedTx) Advance(context.Context, Attempt, string, map[string]string) error {
	return unsupported("Advance", "recovery points")
}

func (UnsupportedTx) DeferClaim(Claim) bool { return false }

func (UnsupportedTx) DeferredClaimResult() (ran bool, err error) { return false, nil }

// CompleteThenCommit is Tx.CompleteAndCommit in two steps, Complete then
// Commit, for a store that has no one-step form.
func CompleteThenCommit(ctx context.Context, tx Tx, a Attempt, resp Response) (completed bool, err error) {
	if err := tx.Complete(ctx, a, resp); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// KeyRef names one record: a key in the scope of its user.
type KeyRef struct {
	Scope string
	Key   string
}

// OutcomeUnknownType is the type of idem-gateway's outcome-unknown problem
// (docs/problems.md): its request reached the upstream and no answer came
// back, and no retry may send it again until an operator has found out
// what the upstream did.
const OutcomeUnknownType = "https://github.com/idem-dev/idem/blob/main/docs/problems.md#outcome-unknown"

// AwaitsOperator reports whether a record holds the outcome-unknown answer:
// a COMPLETED record answered 409 whose body names OutcomeUnknownType, as
// a JSON string. Only an operator settles it (Store.ReplaceResponse,
// Store.Release): DeleteExpired never deletes it, whatever its expiry. The
// stores' SQL tests the same bytes.
func AwaitsOperator(status Status, resp *Response) bool {
	return status == StatusCompleted && resp != nil && resp.StatusCode == 409 &&
		bytes.Contains(resp.Body, []byte(`"`+OutcomeUnknownType+`"`))
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
	// (Keys.Advance), by provider; empty before the first.
	ProviderKeys map[string]string
}

// Unfinished is an unfinished record as Store.FindUnfinished lists it.
type Unfinished struct {
	KeyRef
	Fingerprint Fingerprint
	Point       string
	// Token is the fencing token of the attempt that last held it.
	Token string
}
