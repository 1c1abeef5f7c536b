package memstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/idem-dev/idem/store"
)

// Tx is a transaction of the store. It sees the committed records and its
// own writes; each record it writes is held until it ends, and another
// transaction that writes it waits. Its state is guarded by the store's mu.
type Tx struct {
	s    *Store
	wait time.Duration

	writes  map[store.KeyRef]*record // this transaction's versions of the rows it holds
	audit   []store.AuditEntry       // entries it appended, logged when it commits
	claim   *store.Claim             // deferred to the completion (DeferClaim)
	ran     bool                     // the deferred claim ran
	claimed error                    // and failed so
	aborted bool                     // a deferred claim failed: nothing of it commits
	ended   bool
}

// Context returns ctx: the store has no business tables for a handler to
// write through.
func (t *Tx) Context(ctx context.Context) context.Context { return ctx }

// Commit makes the transaction's writes the records' committed versions,
// and appends its audit entries to the store's log. A
// transaction whose deferred claim failed commits nothing and returns
// store.ErrTxAborted.
func (t *Tx) Commit(context.Context) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ended {
		return fmt.Errorf("commit: %w", errTxEnded)
	}
	if t.aborted {
		t.end(false)
		return fmt.Errorf("commit: %w", store.ErrTxAborted)
	}
	t.end(true)
	return nil
}

// CompleteAndCommit is Complete, then Commit.
func (t *Tx) CompleteAndCommit(ctx context.Context, a store.Attempt, resp store.Response) (bool, error) {
	return store.CompleteThenCommit(ctx, t, a, resp)
}

// Rollback drops the transaction's writes; after a Commit it does nothing.
func (t *Tx) Rollback(context.Context) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.ended {
		t.end(false)
	}
	return nil
}

// end releases every row the transaction holds, with s.mu held, keeping
// its writes and its audit entries when commit.
func (t *Tx) end(commit bool) {
	t.ended = true
	if commit {
		t.s.audit = append(t.s.audit, t.audit...)
	}
	t.audit = nil
	for k, w := range t.writes {
		rw := t.s.rows[k]
		if commit {
			rw.rec = w
		}
		rw.holder = nil
		close(rw.released)
		if rw.rec == nil {
			delete(t.s.rows, k)
		}
	}
	t.writes = nil
}

// open checks, with s.mu held, that statements may still run.
func (t *Tx) open() error {
	switch {
	case t.ended:
		return errTxEnded
	case t.aborted:
		return store.ErrTxAborted
	}
	return nil
}

// visible is k's record as the transaction sees it, with s.mu held; nil
// when there is none.
func (t *Tx) visible(k store.KeyRef) *record {
	if w, ok := t.writes[k]; ok {
		return w
	}
	if rw := t.s.rows[k]; rw != nil {
		return rw.rec
	}
	return nil
}

// await waits, with s.mu held (released while it waits), until no other
// transaction holds k's row: at most the transaction's bound, then
// store.ErrWaitTimeout.
func (t *Tx) await(ctx context.Context, k store.KeyRef) error {
	var timeout <-chan time.Time
	for {
		rw := t.s.rows[k]
		if rw == nil || rw.holder == nil || rw.holder == t {
			return nil
		}
		if timeout == nil {
			timer := time.NewTimer(t.wait)
			defer timer.Stop()
			timeout = timer.C
		}
		released := rw.released
		t.s.mu.Unlock()
		select {
		case <-released:
			t.s.mu.Lock()
		case <-timeout:
			t.s.mu.Lock()
			return fmt.Errorf("%w: waited %v for the transaction that holds the key", store.ErrWaitTimeout, t.wait)
		case <-ctx.Done():
			t.s.mu.Lock()
			return ctx.Err()
		}
	}
}

// write runs fn on k's record as the transaction sees it, once no other
// transaction holds it; the record fn returns, if any, becomes the
// transaction's version, held until it ends.
func (t *Tx) write(ctx context.Context, k store.KeyRef, fn func(cur *record, now time.Time) (*record, error)) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := t.open(); err != nil {
		return err
	}
	if err := t.await(ctx, k); err != nil {
		return err
	}
	next, err := fn(t.visible(k), time.Now())
	if err != nil || next == nil {
		return err
	}
	if s.rows == nil {
		s.rows = map[store.KeyRef]*row{}
	}
	rw := s.rows[k]
	if rw == nil {
		rw = &row{}
		s.rows[k] = rw
	}
	if rw.holder != t {
		rw.holder, rw.released = t, make(chan struct{})
	}
	if t.writes == nil {
		t.writes = map[store.KeyRef]*record{}
	}
	t.writes[k] = next
	return nil
}

// Get reads k's record as the transaction sees it. It never waits.
func (t *Tx) Get(_ context.Context, scope, key string) (*store.Record, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := t.open(); err != nil {
		return nil, err
	}
	r := t.visible(store.KeyRef{Scope: scope, Key: key})
	if r == nil {
		return nil, store.ErrNotFound
	}
	return r.view(time.Now()), nil
}

// Insert claims an unused key; a key another transaction holds is waited
// for (see store.Keys).
func (t *Tx) Insert(ctx context.Context, c store.Claim) (rec *store.Record, inserted bool, err error) {
	err = t.write(ctx, store.KeyRef{Scope: c.Scope, Key: c.Key}, func(cur *record, now time.Time) (*record, error) {
		if cur != nil {
			rec = cur.view(now)
			return nil, nil
		}
		inserted = true
		r := &record{Record: store.Record{
			Scope: c.Scope, Key: c.Key, Fingerprint: copyFingerprint(c.Fingerprint), Attempts: 1, CreatedAt: now,
		}}
		r.hold(c, now)
		return r, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("insert claim: %w", err)
	}
	return rec, inserted, nil
}

// Reacquire takes over a FAILED record, a PROCESSING one whose lease ran
// out, or a COMPLETED one past retention, while prevToken holds it. A
// finished record past retention starts a new life; an unfinished one
// resumes in its own.
func (t *Tx) Reacquire(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	won, err := t.takeOver(ctx, c, func(r *record, now time.Time) bool {
		return r.Token == prevToken && (abandoned(r, now) || (r.Status == store.StatusCompleted && r.expired(now)))
	}, func(r *record, now time.Time) {
		if r.expired(now) {
			r.Attempts, r.CreatedAt = 1, now
		} else {
			r.Attempts++
		}
		if r.Status == store.StatusCompleted {
			r.RecoveryPoint, r.providerKeys = "", nil
		}
		r.Fingerprint, r.Response = copyFingerprint(c.Fingerprint), nil
		r.hold(c, now)
	})
	if err != nil {
		return false, fmt.Errorf("re-acquire: %w", err)
	}
	return won, nil
}

// takeOver is a compare-and-swap on c's record: when may holds, take
// changes it and the transaction holds it.
func (t *Tx) takeOver(ctx context.Context, c store.Claim, may func(*record, time.Time) bool, take func(*record, time.Time)) (won bool, err error) {
	err = t.write(ctx, store.KeyRef{Scope: c.Scope, Key: c.Key}, func(cur *record, now time.Time) (*record, error) {
		if cur == nil || !may(cur, now) {
			return nil, nil
		}
		won = true
		next := cur.clone()
		take(next, now)
		return next, nil
	})
	return won, err
}

// fenced changes the record a's token holds in status with change, else
// fails with store.ErrNotHeld.
func (t *Tx) fenced(ctx context.Context, op string, a store.Attempt, status store.Status, change func(*record, time.Time)) error {
	err := t.write(ctx, store.KeyRef{Scope: a.Scope, Key: a.Key}, func(cur *record, now time.Time) (*record, error) {
		if cur == nil || cur.Token != a.Token || cur.Status != status {
			return nil, store.ErrNotHeld
		}
		next := cur.clone()
		change(next, now)
		return next, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Complete stores the final response, fenced by a's token; with a deferred
// claim, it records the key already COMPLETED instead.
func (t *Tx) Complete(ctx context.Context, a store.Attempt, resp store.Response) error {
	if c := t.deferred(); c != nil {
		return t.claimCompleted(ctx, *c, resp)
	}
	return t.fenced(ctx, "complete", a, store.StatusProcessing, func(r *record, now time.Time) {
		r.Status, r.LeaseExpiresAt, r.Response, r.CompletedAt = store.StatusCompleted, now, copyResponse(resp), now
	})
}

// Fail marks the record FAILED and ends its lease, fenced by a's token.
func (t *Tx) Fail(ctx context.Context, a store.Attempt) error {
	return t.fenced(ctx, "fail", a, store.StatusProcessing, func(r *record, now time.Time) {
		r.Status, r.LeaseExpiresAt = store.StatusFailed, now
	})
}

// Renew extends the lease to now plus d, fenced by a's token.
func (t *Tx) Renew(ctx context.Context, a store.Attempt, d time.Duration) error {
	return t.fenced(ctx, "renew", a, store.StatusProcessing, func(r *record, now time.Time) {
		r.LeaseExpiresAt = now.Add(d)
	})
}

// Progress reads the recovery point and the life in one read fenced by a's
// token (store.Keys.Advance).
func (t *Tx) Progress(_ context.Context, a store.Attempt) (store.Progress, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := t.open(); err != nil {
		return store.Progress{}, fmt.Errorf("progress: %w", err)
	}
	r := t.visible(store.KeyRef{Scope: a.Scope, Key: a.Key})
	if r == nil || r.Token != a.Token || r.Status != store.StatusProcessing {
		return store.Progress{}, fmt.Errorf("progress: %w", store.ErrNotHeld)
	}
	return store.Progress{Point: r.RecoveryPoint, Life: r.CreatedAt, ProviderKeys: maps.Clone(r.providerKeys)}, nil
}

// Advance sets the recovery point, fenced by a's token, and records keys a
// provider has none of yet (store.Keys.Advance).
func (t *Tx) Advance(ctx context.Context, a store.Attempt, point string, keys map[string]string) error {
	if point == "" {
		return errors.New("memstore: advance: the recovery point is empty")
	}
	return t.fenced(ctx, "advance", a, store.StatusProcessing, func(r *record, _ time.Time) {
		r.RecoveryPoint = point
		for provider, key := range keys {
			if _, ok := r.providerKeys[provider]; !ok {
				if r.providerKeys == nil {
					r.providerKeys = map[string]string{}
				}
				r.providerKeys[provider] = key
			}
		}
	})
}

// Release marks the COMPLETED record a's token holds FAILED and drops its
// response (store.Capabilities.Resolve; store.AuditTx).
func (t *Tx) Release(ctx context.Context, a store.Attempt) error {
	return t.fenced(ctx, "release", a, store.StatusCompleted, func(r *record, _ time.Time) {
		r.Status, r.Response, r.CompletedAt = store.StatusFailed, nil, time.Time{}
	})
}

// ReplaceResponse replaces the response of the COMPLETED record a's token
// holds, and binds its key for the record's retention again, from now
// (store.Capabilities.Resolve; store.AuditTx).
func (t *Tx) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	return t.fenced(ctx, "replace response", a, store.StatusCompleted, func(r *record, now time.Time) {
		r.Response, r.CompletedAt = copyResponse(resp), now
		if again := now.Add(r.ExpiresAt.Sub(r.ClaimedAt)); again.After(r.ExpiresAt) {
			r.ExpiresAt = again
		}
	})
}

// AppendAudit records e, stamped with the store's clock, in the store's
// audit log when the transaction commits (store.AuditTx).
func (t *Tx) AppendAudit(_ context.Context, e store.AuditEntry) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := t.open(); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	e.At = time.Now()
	t.audit = append(t.audit, e)
	return nil
}

// DeferClaim holds c back until Complete (store.Tx.DeferClaim).
func (t *Tx) DeferClaim(c store.Claim) bool {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ended || t.claim != nil {
		return false
	}
	t.claim = &c
	return true
}

// DeferredClaimResult reports whether the deferred claim ran, and how
// (store.Tx.DeferClaim).
func (t *Tx) DeferredClaimResult() (ran bool, err error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.ran, t.claimed
}

// deferred returns the deferred claim that has not run yet, if any.
func (t *Tx) deferred() *store.Claim {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.ran {
		return nil
	}
	return t.claim
}

// claimCompleted runs the deferred claim c: it records the key COMPLETED
// with resp, as one insert; a key already recorded aborts the transaction
// (store.ErrKeyExists).
func (t *Tx) claimCompleted(ctx context.Context, c store.Claim, resp store.Response) error {
	err := t.write(ctx, store.KeyRef{Scope: c.Scope, Key: c.Key}, func(cur *record, now time.Time) (*record, error) {
		if cur != nil {
			return nil, store.ErrKeyExists
		}
		r := &record{Record: store.Record{
			Scope: c.Scope, Key: c.Key, Fingerprint: copyFingerprint(c.Fingerprint), Status: store.StatusCompleted,
			Attempts: 1, Token: c.Token, ClaimedAt: now, LeaseExpiresAt: now, Response: copyResponse(resp),
			CreatedAt: now, ExpiresAt: now.Add(c.TTL), CompletedAt: now,
		}}
		return r, nil
	})
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t.ran, t.claimed = true, err
	if err != nil {
		t.aborted = true
		return fmt.Errorf("complete: %w", err)
	}
	return nil
}
