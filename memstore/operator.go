package memstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/store"
)

// ListKeys returns at most q.MaxRecords() committed records that q
// selects, newest first, or with q.Unfinished held longest ago first
// (store.Capabilities.Search). Records of the same instant (a synctest
// bubble's clock stands still) come by scope and key, the same each time.
func (s *Store) ListKeys(_ context.Context, q store.KeyQuery) ([]store.Record, error) {
	order := func(a, b *record) int { return b.CreatedAt.Compare(a.CreatedAt) }
	if q.Unfinished {
		order = func(a, b *record) int { return a.ClaimedAt.Compare(b.ClaimedAt) }
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	found := s.committed(q.MaxRecords(), false, func(r *record) bool { return selects(q, r) }, func(a, b *record) int {
		return cmp.Or(order(a, b), compareRefs(a.ref(), b.ref()))
	})
	recs := make([]store.Record, len(found))
	for i, r := range found {
		recs[i] = *r.view(now)
	}
	return recs, nil
}

// selects reports whether q selects r, as store.KeyQuery says.
func selects(q store.KeyQuery, r *record) bool {
	return (q.Scope == "" || r.Scope == q.Scope) &&
		(q.Key == "" || r.Key == q.Key) &&
		(q.Status == "" || r.Status == q.Status) &&
		(!q.Unfinished || !r.finished()) &&
		(q.ResponseCode == 0 || r.Response != nil && r.Response.StatusCode == q.ResponseCode) &&
		strings.HasPrefix(r.Fingerprint.Path, q.PathPrefix) &&
		(q.CreatedBefore.IsZero() || r.CreatedAt.Before(q.CreatedBefore))
}

// CountKeys counts the committed records by state, exactly
// (store.Capabilities.Search). The oldest in flight is the one created
// first; the oldest unfinished, the one held longest ago.
func (s *Store) CountKeys(context.Context) (store.KeyCounts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := store.KeyCounts{Now: time.Now(), Unfinished: map[string]int64{}}
	c.Processing.Exact, c.Completed.Exact, c.Failed.Exact = true, true, true
	for _, rw := range s.rows {
		r := rw.rec
		if r == nil {
			continue
		}
		switch r.Status {
		case store.StatusProcessing:
			c.Processing.N++
			c.OldestProcessing = earliest(c.OldestProcessing, r.CreatedAt)
		case store.StatusCompleted:
			c.Completed.N++
		case store.StatusFailed:
			c.Failed.N++
		}
		if !r.finished() {
			c.Unfinished[r.RecoveryPoint]++
			c.OldestUnfinished = earliest(c.OldestUnfinished, r.ClaimedAt)
		}
	}
	return c, nil
}

// earliest is the earlier of t, zero for none yet, and u.
func earliest(t, u time.Time) time.Time {
	if t.IsZero() || u.Before(t) {
		return u
	}
	return t
}

// ProviderKeys returns the downstream keys recorded on the committed
// record (store.Capabilities.Search); store.ErrNotFound without one.
func (s *Store) ProviderKeys(_ context.Context, scope, key string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rw := s.rows[store.KeyRef{Scope: scope, Key: key}]
	if rw == nil || rw.rec == nil {
		return nil, store.ErrNotFound
	}
	return maps.Clone(rw.rec.providerKeys), nil
}

// AppendAudit records e, stamped with the store's clock
// (store.Capabilities.AuditLog).
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	return s.auto(ctx, func(t *Tx) error { return t.AppendAudit(ctx, e) })
}

// ListAudit returns the latest entries of the audit log, newest first, at
// most limit: every key's, or only ref's when ref.Scope is not empty
// (store.Capabilities.AuditLog).
func (s *Store) ListAudit(_ context.Context, ref store.KeyRef, limit int) ([]store.AuditEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.AuditEntry
	for _, e := range slices.Backward(s.audit) {
		if len(out) >= limit {
			break
		}
		if ref.Scope == "" || (e.Scope == ref.Scope && e.Key == ref.Key) {
			out = append(out, e)
		}
	}
	return out, nil
}

// BeginAudit starts a transaction in which an operator's action and its
// audit entry commit together, or neither does (store.AuditTx).
func (s *Store) BeginAudit(ctx context.Context) (store.AuditTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("begin audit: %w", err)
	}
	return s.begin(DefaultMaxWait), nil
}
