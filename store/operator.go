package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// KeyQuery selects records for an operator's search (Store.ListKeys). Its zero
// value selects every record.
type KeyQuery struct {
	Scope string // exactly this scope (user); "" for any
	Key   string // exactly this key; "" for any
	// Status selects one state; "" for any.
	Status Status
	// Unfinished selects only unfinished records: a recovery point, not
	// COMPLETED.
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
	// OldestProcessing is the creation time (CreatedAt) of the oldest
	// PROCESSING record, which the search by status and age serves;
	// OldestUnfinished the claim time (ClaimedAt) of the unfinished record
	// held longest ago. Zero for none.
	OldestProcessing, OldestUnfinished time.Time
	// Now is the store's clock when it counted.
	Now time.Time
}

// AuditEntry is one operator action, as a store's audit log keeps it.
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

// AuditTx is a transaction of Store.BeginAudit: an operator's action on a
// record (fenced as Store.Release's) and its audit entry, as one unit. A
// crash between them can leave neither an action without its entry nor an
// entry without its action.
type AuditTx interface {
	// Release is Store.Release, in the transaction.
	Release(ctx context.Context, a Attempt) error
	// ReplaceResponse is Store.ReplaceResponse, in the transaction.
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
// transaction of s: both commit, or neither does. A record another attempt
// or operator changed since rec was read is ErrNotHeld, nothing changed.
// An answer CheckAnswer refuses, or an entry whose reason CheckReason
// refuses, changes nothing either: an error wrapping ErrInvalidAction.
func Resolve(ctx context.Context, s Store, rec *Record, answer *Response, entry func(after *Record) AuditEntry) error {
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
	tx, err := s.BeginAudit(ctx)
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
