package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// KeyQuery selects records for an operator's search (KeyLister). Its zero
// value selects every record.
type KeyQuery struct {
	Scope string // exactly this scope (user); "" for any
	Key   string // exactly this key; "" for any
	// Status selects one state; "" for any.
	Status Status
	// Unfinished selects only unfinished records (Advancer): a recovery
	// point, not COMPLETED.
	Unfinished bool
	// ResponseCode selects records whose stored response has this status
	// code; 0 for any.
	ResponseCode int
	// PathPrefix selects records whose request path begins with it.
	PathPrefix string
	// CreatedBefore selects records created before it (an age, or the
	// next page); the zero time for any.
	CreatedBefore time.Time
	// Limit is the most records returned; zero means 50.
	Limit int
}

// DefaultKeyQueryLimit is KeyQuery.Limit's default.
const DefaultKeyQueryLimit = 50

// MaxRecords is the most records q selects: Limit, or its default.
func (q KeyQuery) MaxRecords() int {
	if q.Limit <= 0 {
		return DefaultKeyQueryLimit
	}
	return q.Limit
}

// KeyCount is one count of KeyCounts: Exact is false when the store
// estimated it from its statistics rather than counting.
type KeyCount struct {
	N     int64
	Exact bool
}

// KeyCounts counts records by state. Unfinished counts are by recovery
// point.
type KeyCounts struct {
	Processing, Completed, Failed KeyCount
	Unfinished                    map[string]int64
	// OldestProcessing and OldestUnfinished are the claim times of the
	// oldest such records, zero for none.
	OldestProcessing, OldestUnfinished time.Time
	// Now is the store's clock when it counted.
	Now time.Time
}

// KeyLister is a Store an operator can search: the console's listing. The
// middleware never calls it. Each search is served by an index of the
// key table: by key, by scope (the primary key), by status and age, and
// unfinished records; docs/console.md names them.
type KeyLister interface {
	Store
	// ListKeys returns at most q.Limit records matching q, newest first
	// (unfinished ones: held longest ago first).
	ListKeys(ctx context.Context, q KeyQuery) ([]Record, error)
	// CountKeys counts the records by state. Large counts may be estimates.
	CountKeys(ctx context.Context) (KeyCounts, error)
	// ProviderKeys returns the downstream keys recorded on a record
	// (Advancer.Advance), by provider; ErrNotFound when it has no record.
	ProviderKeys(ctx context.Context, scope, key string) (map[string]string, error)
}

// AuditEntry is one operator action, as an AuditLog keeps it.
type AuditEntry struct {
	At     time.Time // the store's clock; set by AppendAudit
	Actor  string    // who acted, as they named themselves, and from where
	Action string
	Reason string
	Scope  string
	Key    string
	// Before and After describe the record around the action, as text.
	Before, After string
}

// AuditLog is a Store that keeps a durable log of operator actions next to
// the key table. The middleware never calls it.
type AuditLog interface {
	Store
	// AppendAudit records e, stamped with the store's clock.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns the latest entries, newest first, at most limit:
	// every key's, or only ref's when ref is not the zero KeyRef.
	ListAudit(ctx context.Context, ref KeyRef, limit int) ([]AuditEntry, error)
	// BeginAudit returns a transaction in which an operator's action and
	// its audit entry commit together, or neither does.
	BeginAudit(ctx context.Context) (AuditTx, error)
}

// AuditTx is a transaction of an AuditLog: an operator's action on a record
// (KeyResolver's, fenced the same way) and its audit entry, as one unit. A
// crash between them can leave neither an action without its entry nor an
// entry without its action.
type AuditTx interface {
	// Release is KeyResolver.Release, in the transaction.
	Release(ctx context.Context, a Attempt) error
	// ReplaceResponse is KeyResolver.ReplaceResponse, in the transaction.
	ReplaceResponse(ctx context.Context, a Attempt, resp Response) error
	// AppendAudit records e in the transaction, stamped with the store's
	// clock.
	AppendAudit(ctx context.Context, e AuditEntry) error
	Commit(ctx context.Context) error
	// Rollback undoes the action and the entry; after Commit, a no-op.
	Rollback(ctx context.Context) error
}

// Resolve settles the outcome-unknown record rec as an operator decided,
// fenced on rec's token: it releases the key (answer nil: the next retry
// runs afresh) or records answer as its final response, and appends the
// audit entry entry returns for the record as the change leaves it, in one
// transaction of l: both commit, or neither does. A record another attempt
// or operator changed since rec was read is ErrNotHeld, nothing changed.
// An answer CheckAnswer refuses, or an entry whose reason CheckReason
// refuses, changes nothing either: an error wrapping ErrInvalidAction.
func Resolve(ctx context.Context, l AuditLog, rec *Record, answer *Response, entry func(after *Record) AuditEntry) error {
	a := Attempt{Scope: rec.Scope, Key: rec.Key, Token: rec.Token}
	after := *rec
	change := func(tx AuditTx) error { return tx.Release(ctx, a) }
	if answer != nil {
		if err := CheckAnswer(*answer); err != nil {
			return err
		}
		after.Response = answer
		change = func(tx AuditTx) error { return tx.ReplaceResponse(ctx, a, *answer) }
	} else {
		after.Status, after.Response = StatusFailed, nil
	}
	e := entry(&after)
	if err := CheckReason(e.Reason); err != nil {
		return err
	}
	tx, err := l.BeginAudit(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit, a no-op
	if err := change(tx); err != nil {
		return err
	}
	if err := tx.AppendAudit(ctx, e); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// DescribeRecord is what an audit entry says of rec: its status, state
// (what the caller calls it, if anything), attempts, fencing token,
// recovery point, and the answer's status, type and size, never its body.
func DescribeRecord(rec *Record, state string) string {
	var b strings.Builder
	b.WriteString(string(rec.Status))
	if state != "" {
		fmt.Fprintf(&b, " (%s)", state)
	}
	fmt.Fprintf(&b, " attempts=%d token=%s", rec.Attempts, rec.Token)
	if rec.RecoveryPoint != "" {
		fmt.Fprintf(&b, " point=%s", rec.RecoveryPoint)
	}
	if r := rec.Response; r != nil {
		fmt.Fprintf(&b, " response=%d %s (%d bytes)", r.StatusCode, r.Header.Get("Content-Type"), len(r.Body))
	}
	return b.String()
}
