package storetest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunOperator checks the operator's capabilities: Search searches by key, scope, state, response code, path and age, newest first
// (unfinished: held longest ago first), counts by state, and reads a
// record's provider keys; AuditLog keeps entries, newest first, by
// key or all, and commits an action with its audit entry or neither
// (store.AuditTx). A store without a capability skips its tests.
func RunOperator(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	lister := func(t *testing.T) store.Store {
		t.Helper()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().Search, "Search")
		skipWithout(t, s, s.Capabilities().RecoveryPoints, "RecoveryPoints")
		return s
	}
	keys := func(recs []store.Record) []store.KeyRef {
		refs := make([]store.KeyRef, len(recs))
		for i, r := range recs {
			refs[i] = store.KeyRef{Scope: r.Scope, Key: r.Key}
		}
		return refs
	}

	t.Run("Searches", func(t *testing.T) {
		t.Parallel()
		s := lister(t)
		done1 := putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		failed := putRecord(t, s, "alice", store.StatusFailed, long, ttl)
		inFlight := putRecord(t, s, "bob", store.StatusProcessing, long, ttl)
		done2 := putRecord(t, s, "bob", store.StatusCompleted, long, ttl)
		unfinished := putRecord(t, s, "carol", store.StatusProcessing, long, ttl)
		require.NoError(t, s.Advance(ctx, unfinished.Attempt(), "debited", map[string]string{"bank": "bk-1"}))
		require.NoError(t, s.Fail(ctx, unfinished.Attempt()))

		all, err := s.ListKeys(ctx, store.KeyQuery{})
		require.NoError(t, err)
		require.Equal(t, []store.KeyRef{ref(unfinished), ref(done2), ref(inFlight), ref(failed), ref(done1)}, keys(all), "newest first")
		for _, c := range []struct {
			name string
			q    store.KeyQuery
			want []store.KeyRef
		}{
			{"Key", store.KeyQuery{Key: done2.Key}, []store.KeyRef{ref(done2)}},
			{"Scope", store.KeyQuery{Scope: "alice"}, []store.KeyRef{ref(failed), ref(done1)}},
			{"Status", store.KeyQuery{Status: store.StatusCompleted}, []store.KeyRef{ref(done2), ref(done1)}},
			{"StatusAndScope", store.KeyQuery{Status: store.StatusCompleted, Scope: "bob"}, []store.KeyRef{ref(done2)}},
			{"Unfinished", store.KeyQuery{Unfinished: true}, []store.KeyRef{ref(unfinished)}},
			{"ResponseCode", store.KeyQuery{ResponseCode: 201, Scope: "alice"}, []store.KeyRef{ref(done1)}},
			{"PathPrefix", store.KeyQuery{PathPrefix: "/v1/pay", Scope: "bob"}, []store.KeyRef{ref(done2), ref(inFlight)}},
			{"OtherPath", store.KeyQuery{PathPrefix: "/v2/"}, []store.KeyRef{}},
			{"Limit", store.KeyQuery{Limit: 2}, []store.KeyRef{ref(unfinished), ref(done2)}},
			{"CreatedBefore", store.KeyQuery{CreatedBefore: all[1].CreatedAt}, []store.KeyRef{ref(inFlight), ref(failed), ref(done1)}},
		} {
			got, err := s.ListKeys(ctx, c.q)
			require.NoError(t, err, c.name)
			require.Equal(t, c.want, keys(got), c.name)
		}
		got, err := s.ListKeys(ctx, store.KeyQuery{Key: unfinished.Key})
		require.NoError(t, err)
		require.Equal(t, "debited", got[0].RecoveryPoint)
		require.Equal(t, unfinished.Token, got[0].Token)
	})

	t.Run("Counts", func(t *testing.T) {
		t.Parallel()
		s := lister(t)
		putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		putRecord(t, s, "alice", store.StatusFailed, long, ttl)
		putRecord(t, s, "bob", store.StatusProcessing, long, ttl)
		u := putRecord(t, s, "bob", store.StatusProcessing, long, ttl)
		require.NoError(t, s.Advance(ctx, u.Attempt(), "debited", nil))
		c, err := s.CountKeys(ctx)
		require.NoError(t, err)
		require.Equal(t, store.KeyCount{N: 2, Exact: true}, c.Processing)
		require.Equal(t, store.KeyCount{N: 2, Exact: true}, c.Completed)
		require.Equal(t, store.KeyCount{N: 1, Exact: true}, c.Failed)
		require.Equal(t, map[string]int64{"debited": 1}, c.Unfinished)
		require.False(t, c.OldestProcessing.IsZero())
		require.False(t, c.OldestUnfinished.IsZero())
	})

	t.Run("ProviderKeys", func(t *testing.T) {
		t.Parallel()
		s := lister(t)
		c := putRecord(t, s, "alice", store.StatusProcessing, long, ttl)
		pk, err := s.ProviderKeys(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Empty(t, pk)
		require.NoError(t, s.Advance(ctx, c.Attempt(), "sent", map[string]string{"bank": "bk-1"}))
		pk, err = s.ProviderKeys(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"bank": "bk-1"}, pk)
		_, err = s.ProviderKeys(ctx, "alice", newKey())
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("AuditLog", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().AuditLog, "AuditLog")
		first := store.AuditEntry{Actor: "ann", Action: "release", Reason: "INC-1", Scope: "alice", Key: "k1", Before: "COMPLETED", After: "FAILED"}
		second := store.AuditEntry{Actor: "bob", Action: "answer", Reason: "INC-2", Scope: "bob", Key: "k2", Before: "a", After: "b"}
		before := time.Now().Add(-time.Minute)
		require.NoError(t, s.AppendAudit(ctx, first))
		require.NoError(t, s.AppendAudit(ctx, second))
		all, err := s.ListAudit(ctx, store.KeyRef{}, 10)
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.True(t, all[0].At.After(before), "stamped by the store: %v", all[0].At)
		all[0].At, all[1].At = time.Time{}, time.Time{}
		require.Equal(t, []store.AuditEntry{second, first}, all, "newest first")
		one, err := s.ListAudit(ctx, store.KeyRef{Scope: "alice", Key: "k1"}, 10)
		require.NoError(t, err)
		require.Len(t, one, 1)
		require.Equal(t, "INC-1", one[0].Reason)
		last, err := s.ListAudit(ctx, store.KeyRef{}, 1)
		require.NoError(t, err)
		require.Len(t, last, 1)
		require.Equal(t, "INC-2", last[0].Reason)
	})

	t.Run("AuditTx", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().AuditLog, "AuditLog")
		released := putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		answered := putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		entry := func(c store.Claim, action string) store.AuditEntry {
			return store.AuditEntry{Actor: "ann", Action: action, Reason: "INC-3", Scope: c.Scope, Key: c.Key, Before: "COMPLETED 201", After: action + "d"}
		}
		audited := func(c store.Claim) []store.AuditEntry {
			t.Helper()
			es, err := s.ListAudit(ctx, ref(c), 10)
			require.NoError(t, err)
			return es
		}
		record := func(c store.Claim) *store.Record {
			t.Helper()
			rec, err := s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			return rec
		}
		begin := func() store.AuditTx {
			t.Helper()
			tx, err := s.BeginAudit(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(ctx) })
			return tx
		}

		// Fenced out: the action changes nothing, and the entry written
		// before it goes with it.
		tx := begin()
		require.NoError(t, tx.AppendAudit(ctx, entry(released, "release")))
		stale := released.Attempt()
		stale.Token = claim("alice", released.Key, "body", long, ttl).Token
		require.ErrorIs(t, tx.Release(ctx, stale), store.ErrNotHeld)
		require.NoError(t, tx.Rollback(ctx))
		require.Empty(t, audited(released), "no entry without its action")
		require.Equal(t, store.StatusCompleted, record(released).Status)

		// Both written, then rolled back: neither stays.
		tx = begin()
		require.NoError(t, tx.Release(ctx, released.Attempt()))
		require.NoError(t, tx.AppendAudit(ctx, entry(released, "release")))
		require.NoError(t, tx.Rollback(ctx))
		require.Empty(t, audited(released))
		require.Equal(t, store.StatusCompleted, record(released).Status, "no action without its entry")

		// Committed: the action and exactly one entry, with before and after.
		tx = begin()
		require.NoError(t, tx.Release(ctx, released.Attempt()))
		require.NoError(t, tx.AppendAudit(ctx, entry(released, "release")))
		require.NoError(t, tx.Commit(ctx))
		require.Equal(t, store.StatusFailed, record(released).Status)
		es := audited(released)
		require.Len(t, es, 1)
		require.Equal(t, "COMPLETED 201", es[0].Before)
		require.Equal(t, "released", es[0].After)

		tx = begin()
		require.NoError(t, tx.ReplaceResponse(ctx, answered.Attempt(), store.Response{StatusCode: 409, Body: []byte("real")}))
		require.NoError(t, tx.AppendAudit(ctx, entry(answered, "answer")))
		require.NoError(t, tx.Commit(ctx))
		rec := record(answered)
		require.Equal(t, 409, rec.Response.StatusCode)
		require.Equal(t, "real", string(rec.Response.Body))
		require.Len(t, audited(answered), 1)
		all, err := s.ListAudit(ctx, store.KeyRef{}, 10)
		require.NoError(t, err)
		require.Len(t, all, 2, "one entry per committed action")
	})

	t.Run("ResolveRefusesInvalid", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().AuditLog, "AuditLog")
		c := putRecord(t, s, "alice", store.StatusCompleted, long, ttl)
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		answer := func(h http.Header) *store.Response {
			return &store.Response{StatusCode: 201, Header: h, Body: []byte(`{}`)}
		}
		for name, r := range map[string]struct {
			answer *store.Response
			reason string
		}{
			"ContentTypeCRLF":    {answer(http.Header{"Content-Type": {"text/html\r\nSet-Cookie: a=b"}}), "INC-4"},
			"ContentTypeInvalid": {answer(http.Header{"Content-Type": {"not a type"}}), "INC-4"},
			"LocationJavaScript": {answer(http.Header{"Location": {"javascript:alert(1)"}}), "INC-4"},
			"LocationData":       {answer(http.Header{"Location": {"DATA:text/html,x"}}), "INC-4"},
			"OtherHeader":        {answer(http.Header{"Refresh": {"0; url=https://evil.example"}}), "INC-4"},
			"Status302":          {&store.Response{StatusCode: 302}, "INC-4"},
			"Status500":          {&store.Response{StatusCode: 500}, "INC-4"},
			"ReasonTooLong":      {nil, strings.Repeat("é", store.MaxReasonChars+1)},
			"ReasonEmpty":        {nil, " "},
			"ReasonNUL":          {nil, "INC\x004"},
		} {
			err := store.Resolve(ctx, s, rec, r.answer, func(*store.Record) store.AuditEntry {
				return store.AuditEntry{Actor: "ann", Action: "resolve", Reason: r.reason, Scope: c.Scope, Key: c.Key}
			})
			require.ErrorIs(t, err, store.ErrInvalidAction, name)
		}
		after, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, rec.Token, after.Token, "nothing changed")
		require.Equal(t, store.StatusCompleted, after.Status)
		es, err := s.ListAudit(ctx, ref(c), 10)
		require.NoError(t, err)
		require.Empty(t, es, "no entry for a refused action")

		ok500 := strings.Repeat("é", store.MaxReasonChars)
		require.NoError(t, store.Resolve(ctx, s, rec, answer(http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Location": {"/v1/orders/1"}}),
			func(*store.Record) store.AuditEntry {
				return store.AuditEntry{Actor: "ann", Action: "resolve", Reason: ok500, Scope: c.Scope, Key: c.Key}
			}))
		es, err = s.ListAudit(ctx, ref(c), 10)
		require.NoError(t, err)
		require.Len(t, es, 1)
		require.Equal(t, ok500, es[0].Reason, "500 characters are kept whole")
	})
}
