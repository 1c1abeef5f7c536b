// Package memstore is a store.Store in memory: the reference
// implementation of the store contract, serving every operation of it, so
// that the idem middleware, its doors, its adapters and the operator's
// console test themselves without a database. It keeps nothing across a
// restart and serves one process: use pgstore or sqlitestore in
// production.
//
//	mw, err := idem.New(memstore.New(), idem.Config{})
//
// It behaves as the SQL stores do, statement by statement: a claim is one
// atomic insert, a re-acquire one conditional update, every write is fenced
// by its token, and lease expiry and retention are judged by the store's
// own clock (time.Now). A transaction holds each record it wrote until it
// ends, and another transaction that writes the same record waits for it,
// at most store.TxOptions.MaxWait, as on a row lock; the Store's own
// operations each run in a transaction of their own. Its audit log keeps
// the entries of committed transactions, in the order they committed. It
// has no business tables: Tx.Context carries nothing for a handler to
// write through.
//
// Its waits are on channels and timers only, and it starts no goroutine,
// so under testing/synctest its clock is the bubble's and a request
// waiting on a key is durably blocked.
package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/idem-dev/idem/store"
)

// DefaultMaxWait bounds a wait for a record another transaction holds when
// store.TxOptions.MaxWait is zero, and always for the Store's own
// operations.
const DefaultMaxWait = 5 * time.Second

// Store keeps idempotency records in memory. The zero value is an empty
// store, ready to use; a Store must not be copied after first use.
type Store struct {
	mu    sync.Mutex            // guards rows, audit and every Tx's state
	rows  map[store.KeyRef]*row // nil until the first write
	audit []store.AuditEntry    // the audit log, oldest first
}

// row is one key's record: the committed version, and the transaction that
// holds it while that transaction is open.
type row struct {
	rec      *record // committed; nil while only an open transaction has inserted it
	holder   *Tx     // the open transaction that wrote the row, if any
	released chan struct{}
}

// record is a row's content. Its LeaseLive and Expired are judged at each
// read, by the clock of that moment.
type record struct {
	store.Record
	providerKeys map[string]string
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Tx      = (*Tx)(nil)
	_ store.AuditTx = (*Tx)(nil)
)

// New returns an empty Store.
func New() *Store { return &Store{} }

// Capabilities reports every operation served. OneStepCommit is false (a
// commit costs no round trip here) and so is ClaimLocksStore (a claim
// holds its one record).
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{DeferredClaim: true, RecoveryPoints: true, Unfinished: true, Sweep: true,
		Search: true, Resolve: true, AuditLog: true}
}

// Begin starts a transaction. It holds nothing until it writes a record.
func (s *Store) Begin(ctx context.Context, opts store.TxOptions) (store.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return s.begin(opts.MaxWait), nil
}

func (s *Store) begin(wait time.Duration) *Tx {
	if wait <= 0 {
		wait = DefaultMaxWait
	}
	return &Tx{s: s, wait: wait}
}

// auto runs fn in a transaction of its own, committed when fn succeeds.
func (s *Store) auto(ctx context.Context, fn func(t *Tx) error) error {
	t := s.begin(DefaultMaxWait)
	if err := fn(t); err != nil {
		_ = t.Rollback(ctx)
		return err
	}
	return t.Commit(ctx)
}

// Get reads the committed record.
func (s *Store) Get(ctx context.Context, scope, key string) (rec *store.Record, err error) {
	return s.begin(0).Get(ctx, scope, key)
}

// Insert claims an unused key (see store.Keys).
func (s *Store) Insert(ctx context.Context, c store.Claim) (rec *store.Record, inserted bool, err error) {
	err = s.auto(ctx, func(t *Tx) error {
		rec, inserted, err = t.Insert(ctx, c)
		return err
	})
	return rec, inserted, err
}

// Reacquire takes a record over from prevToken (see store.Keys).
func (s *Store) Reacquire(ctx context.Context, c store.Claim, prevToken string) (won bool, err error) {
	err = s.auto(ctx, func(t *Tx) error {
		won, err = t.Reacquire(ctx, c, prevToken)
		return err
	})
	return won, err
}

// Complete stores the final response, fenced by a's token.
func (s *Store) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	return s.auto(ctx, func(t *Tx) error { return t.Complete(ctx, a, resp) })
}

// Fail marks the record FAILED, fenced by a's token.
func (s *Store) Fail(ctx context.Context, a store.Attempt) error {
	return s.auto(ctx, func(t *Tx) error { return t.Fail(ctx, a) })
}

// Renew extends the lease to now plus d, fenced by a's token.
func (s *Store) Renew(ctx context.Context, a store.Attempt, d time.Duration) error {
	return s.auto(ctx, func(t *Tx) error { return t.Renew(ctx, a, d) })
}

// Progress reads the recovery point and the life, fenced by a's token.
func (s *Store) Progress(ctx context.Context, a store.Attempt) (store.Progress, error) {
	return s.begin(0).Progress(ctx, a)
}

// Advance sets the recovery point and records provider keys, fenced by a's
// token.
func (s *Store) Advance(ctx context.Context, a store.Attempt, point string, keys map[string]string) error {
	return s.auto(ctx, func(t *Tx) error { return t.Advance(ctx, a, point, keys) })
}

// Release marks the COMPLETED record a's token holds FAILED and drops its
// response (store.Capabilities.Resolve).
func (s *Store) Release(ctx context.Context, a store.Attempt) error {
	return s.auto(ctx, func(t *Tx) error { return t.Release(ctx, a) })
}

// ReplaceResponse replaces the response of the COMPLETED record a's token
// holds (store.Capabilities.Resolve), and binds its key for the record's
// retention again, from now.
func (s *Store) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	return s.auto(ctx, func(t *Tx) error { return t.ReplaceResponse(ctx, a, resp) })
}

// ResumeUnfinished takes over the abandoned unfinished record prevToken
// last held, keeping its life (store.Capabilities.Unfinished).
func (s *Store) ResumeUnfinished(ctx context.Context, c store.Claim, prevToken string) (won bool, err error) {
	err = s.auto(ctx, func(t *Tx) error {
		won, err = t.takeOver(ctx, c, func(r *record, now time.Time) bool {
			return r.Token == prevToken && r.RecoveryPoint != "" && abandoned(r, now)
		}, func(r *record, now time.Time) {
			r.Attempts++
			r.hold(c, now)
		})
		return err
	})
	return won, err
}

// committed returns the committed records that match keep, ordered by
// less, at most limit, with s.mu held. A record an open transaction holds
// is left out when skipHeld.
func (s *Store) committed(limit int, skipHeld bool, keep func(r *record) bool, less func(a, b *record) int) []*record {
	var out []*record
	for _, rw := range s.rows {
		if rw.rec != nil && !(skipHeld && rw.holder != nil) && keep(rw.rec) {
			out = append(out, rw.rec)
		}
	}
	slices.SortFunc(out, less)
	return out[:min(limit, len(out))]
}

// DeleteExpired deletes at most limit records past their retention, but
// no live claim and no unfinished record (store.Capabilities.Sweep). A record
// an open transaction holds is left for a later call. Sweeps never overlap,
// so it never returns store.ErrSweepBusy.
func (s *Store) DeleteExpired(_ context.Context, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memstore: delete expired: limit must be positive, got %d", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	gone := s.committed(limit, true, func(r *record) bool {
		return r.expired(now) && (r.Status != store.StatusProcessing || !r.leaseLive(now))
	}, func(a, b *record) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	refs := make([]store.KeyRef, len(gone))
	for i, r := range gone {
		refs[i] = r.ref()
		delete(s.rows, refs[i])
	}
	return refs, nil
}

// ListCompleted lists the COMPLETED records answered with code, by scope
// then key, after after (store.Capabilities.Resolve).
func (s *Store) ListCompleted(_ context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memstore: list completed: limit must be positive, got %d", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found := s.committed(limit, false, func(r *record) bool {
		return r.Status == store.StatusCompleted && r.Response != nil && r.Response.StatusCode == code && compareRefs(r.ref(), after) > 0
	}, func(a, b *record) int { return compareRefs(a.ref(), b.ref()) })
	refs := make([]store.KeyRef, len(found))
	for i, r := range found {
		refs[i] = r.ref()
	}
	return refs, nil
}

// FindUnfinished lists abandoned unfinished records, held longest ago
// first (store.Capabilities.Unfinished).
func (s *Store) FindUnfinished(_ context.Context, limit int) ([]store.Unfinished, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memstore: find unfinished: limit must be positive, got %d", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	found := s.committed(limit, false, func(r *record) bool {
		return r.RecoveryPoint != "" && abandoned(r, now)
	}, func(a, b *record) int { return a.ClaimedAt.Compare(b.ClaimedAt) })
	out := make([]store.Unfinished, len(found))
	for i, r := range found {
		out[i] = store.Unfinished{KeyRef: r.ref(), Fingerprint: copyFingerprint(r.Fingerprint), Point: r.RecoveryPoint, Token: r.Token}
	}
	return out, nil
}

func compareRefs(a, b store.KeyRef) int {
	return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
}

// abandoned: not COMPLETED, and no live hold.
func abandoned(r *record, now time.Time) bool {
	return r.Status == store.StatusFailed || (r.Status == store.StatusProcessing && !r.leaseLive(now))
}

func (r *record) ref() store.KeyRef { return store.KeyRef{Scope: r.Scope, Key: r.Key} }

func (r *record) leaseLive(now time.Time) bool { return r.LeaseExpiresAt.After(now) }

// finished: no recovery point, or COMPLETED. Only a finished record passes
// its retention, is swept, or starts a new life.
func (r *record) finished() bool {
	return r.RecoveryPoint == "" || r.Status == store.StatusCompleted
}

// expired: past retention, finished, and not holding the outcome-unknown
// answer, which binds its key until an operator settles it.
func (r *record) expired(now time.Time) bool {
	return !r.ExpiresAt.After(now) && r.finished() && !store.AwaitsOperator(r.Status, r.Response)
}

// hold makes the record c's attempt's, from now: PROCESSING, so not
// completed.
func (r *record) hold(c store.Claim, now time.Time) {
	r.Status, r.CompletedAt = store.StatusProcessing, time.Time{}
	r.ExpiresAt = later(r.ExpiresAt, now.Add(c.TTL))
	r.Token, r.ClaimedAt, r.LeaseExpiresAt = c.Token, now, now.Add(c.Lease)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// clone is a deep copy: no caller shares a record's slices or maps.
func (r *record) clone() *record {
	c := *r
	c.Fingerprint = copyFingerprint(r.Fingerprint)
	if r.Response != nil {
		c.Response = copyResponse(*r.Response)
	}
	c.providerKeys = maps.Clone(r.providerKeys)
	return &c
}

// view is the record as a read returns it, judged at now.
func (r *record) view(now time.Time) *store.Record {
	rec := r.clone().Record
	rec.LeaseLive, rec.Expired = r.leaseLive(now), r.expired(now)
	return &rec
}

func copyFingerprint(f store.Fingerprint) store.Fingerprint {
	f.Hash = slices.Clone(f.Hash)
	return f
}

func copyResponse(resp store.Response) *store.Response {
	resp.Header = resp.Header.Clone()
	resp.Body = append([]byte{}, resp.Body...) // never nil: a stored response has a body, if an empty one
	return &resp
}

// errTxEnded: a statement came after the transaction committed or rolled
// back.
var errTxEnded = errors.New("memstore: the transaction has ended")
