package storetest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunResolve checks store.Capabilities.Resolve: a completed
// record is listed by its status code, in order and in pages; released, it
// is re-acquired by the next claim; its response replaced, every read gets
// the new one; and neither write touches a record its token no longer
// holds, nor one that is not COMPLETED. A store without the capability
// skips these tests.
func RunResolve(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	resolver := func(t *testing.T) store.Store {
		t.Helper()
		s := newStore(t)
		skipWithout(t, s, s.Capabilities().Resolve, "Resolve")
		return s
	}
	// completed makes a COMPLETED record answered with code.
	completed := func(t *testing.T, s store.Store, scope string, code int) store.Claim {
		t.Helper()
		c := putRecord(t, s, scope, store.StatusProcessing, long, ttl)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: code, Body: []byte("unknown")}))
		return c
	}

	t.Run("ListsByStatusCodeInPages", func(t *testing.T) {
		t.Parallel()
		s := resolver(t)
		want := []store.KeyRef{ref(completed(t, s, "bob", 409)), ref(completed(t, s, "alice", 409)), ref(completed(t, s, "alice", 409))}
		completed(t, s, "alice", 201)
		putRecord(t, s, "alice", store.StatusFailed, long, ttl)
		putRecord(t, s, "alice", store.StatusProcessing, long, ttl)
		var got []store.KeyRef
		after := store.KeyRef{}
		for {
			page, err := s.ListCompleted(ctx, 409, after, 2)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2)
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1]
		}
		require.ElementsMatch(t, want, got)
		for i := 1; i < len(got); i++ {
			prev, cur := got[i-1], got[i]
			require.True(t, prev.Scope < cur.Scope || (prev.Scope == cur.Scope && prev.Key < cur.Key), "ordered: %v", got)
		}
	})

	t.Run("ReopenedKeyRunsAgain", func(t *testing.T) {
		t.Parallel()
		s := resolver(t)
		c := completed(t, s, "alice", 409)
		require.NoError(t, s.Release(ctx, c.Attempt()))
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, rec.Status)
		require.Nil(t, rec.Response)
		require.ErrorIs(t, s.Release(ctx, c.Attempt()), store.ErrNotHeld, "released once only")
		retry := claim(c.Scope, c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, retry, c.Token)
		require.NoError(t, err)
		require.True(t, won, "the next retry takes the released key")
		page, err := s.ListCompleted(ctx, 409, store.KeyRef{}, 10)
		require.NoError(t, err)
		require.Empty(t, page)
	})

	t.Run("ReplacedResponseIsReplayed", func(t *testing.T) {
		t.Parallel()
		s := resolver(t)
		c := completed(t, s, "alice", 409)
		real := store.Response{
			StatusCode: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"p_1"}`),
			ResourceType: "payments", ResourceID: "p_1",
		}
		require.NoError(t, s.ReplaceResponse(ctx, c.Attempt(), real))
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.Equal(t, c.Token, rec.Token)
		require.Equal(t, &real, rec.Response)
	})

	t.Run("ReplacedPastRetentionIsReplayed", func(t *testing.T) {
		t.Parallel()
		s := resolver(t)
		const retention = 2 * time.Second
		c := putRecord(t, s, "alice", store.StatusProcessing, long, retention)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 409, Body: []byte("unknown")}))
		waitExpired(t, s, ref(c))
		real := store.Response{StatusCode: 201, Body: []byte(`{"id":"p_1"}`)}
		require.NoError(t, s.ReplaceResponse(ctx, c.Attempt(), real))
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.True(t, rec.ExpiresAt.After(time.Now().Add(retention/2)), "bound again for its retention: expires %v", rec.ExpiresAt)
		retry := claim(c.Scope, c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, retry, c.Token)
		require.NoError(t, err)
		require.False(t, won, "a retry gets the recorded answer; it does not run again")
		rec, err = s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, &real, rec.Response)
	})

	t.Run("FencedOnTokenAndStatus", func(t *testing.T) {
		t.Parallel()
		s := resolver(t)
		resp := store.Response{StatusCode: 201, Body: []byte("x")}
		running := putRecord(t, s, "alice", store.StatusProcessing, long, ttl)
		failed := putRecord(t, s, "alice", store.StatusFailed, long, ttl)
		done := completed(t, s, "alice", 409)
		stale := done.Attempt()
		stale.Token = claim("alice", done.Key, "body", long, ttl).Token
		unused := claim("alice", newKey(), "body", long, ttl).Attempt()
		for name, a := range map[string]store.Attempt{
			"processing": running.Attempt(), "failed": failed.Attempt(), "another token": stale, "unused": unused,
		} {
			require.ErrorIs(t, s.Release(ctx, a), store.ErrNotHeld, name)
			require.ErrorIs(t, s.ReplaceResponse(ctx, a, resp), store.ErrNotHeld, name)
		}
		rec, err := s.Get(ctx, running.Scope, running.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, rec.Status, "a running attempt keeps its key")
		require.True(t, rec.LeaseLive)
		rec, err = s.Get(ctx, done.Scope, done.Key)
		require.NoError(t, err)
		require.Equal(t, 409, rec.Response.StatusCode, "a stale token changed nothing")
	})

	t.Run("ReacquiredAfterRetentionIsNotReopened", func(t *testing.T) {
		t.Parallel()
		s := resolver(t)
		c := putRecord(t, s, "alice", store.StatusProcessing, long, time.Millisecond)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 409, Body: []byte("unknown")}))
		waitExpired(t, s, ref(c))
		// The operator read the record; then a retry past retention took
		// the key over and is running.
		retry := claim(c.Scope, c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, retry, c.Token)
		require.NoError(t, err)
		require.True(t, won)
		require.ErrorIs(t, s.Release(ctx, c.Attempt()), store.ErrNotHeld)
		rec, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, rec.Status)
		require.Equal(t, retry.Token, rec.Token)
	})
}
