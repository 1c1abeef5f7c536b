package storetest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

const (
	long = time.Minute
	ttl  = 48 * time.Hour
)

// RunKeys checks every state transition of a record through the store's
// own (auto-committed) operations.
func RunKeys(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()

	t.Run("GetUnusedKeyIsNotFound", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Get(ctx, "alice", newKey())
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("InsertClaimsUnusedKey", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		rec, inserted, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		require.Nil(t, rec)

		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, got.Status)
		require.Equal(t, 1, got.Attempts)
		require.Equal(t, c.Token, got.Token)
		require.Equal(t, c.Fingerprint, got.Fingerprint)
		require.True(t, got.LeaseLive)
		require.False(t, got.Expired)
		require.Nil(t, got.Response)
		require.WithinDuration(t, got.CreatedAt.Add(ttl), got.ExpiresAt, time.Second)
		require.WithinDuration(t, got.ClaimedAt.Add(long), got.LeaseExpiresAt, time.Second)
	})

	t.Run("InsertOnUsedKeyReturnsRecord", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		first := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, first)
		require.NoError(t, err)
		second := claim("alice", first.Key, "other body", long, ttl)
		rec, inserted, err := s.Insert(ctx, second)
		require.NoError(t, err)
		require.False(t, inserted)
		require.Equal(t, first.Token, rec.Token)
		require.Equal(t, first.Fingerprint, rec.Fingerprint)
	})

	t.Run("KeysAreScopedByUser", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := newKey()
		a := claim("alice", key, "a", long, ttl)
		b := claim("bob", key, "b", long, ttl)
		_, inserted, err := s.Insert(ctx, a)
		require.NoError(t, err)
		require.True(t, inserted)
		_, inserted, err = s.Insert(ctx, b)
		require.NoError(t, err)
		require.True(t, inserted, "bob's key must not collide with alice's")
		require.NoError(t, s.Complete(ctx, a.Attempt(), store.Response{StatusCode: 201, Body: []byte("alice's")}))

		got, err := s.Get(ctx, "bob", key)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, got.Status)
		require.Nil(t, got.Response)
		require.ErrorIs(t, s.Complete(ctx, store.Attempt{Scope: "bob", Key: key, Token: a.Token}, store.Response{StatusCode: 201}), store.ErrNotHeld,
			"alice's token must not complete bob's record")
	})

	t.Run("CompleteStoresResponseByteForByte", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		body := []byte("{ \"b\": 1,\n  \"a\": \"\u00e9\" }\x00\xff trailing ")
		resp := store.Response{
			StatusCode:   201,
			Header:       http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/payments/p1"}},
			Body:         body,
			ResourceType: "payments",
			ResourceID:   "p1",
		}
		require.NoError(t, s.Complete(ctx, c.Attempt(), resp))

		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.False(t, got.LeaseLive, "completion releases the lock")
		require.Equal(t, &resp, got.Response)
	})

	t.Run("CompleteStoresEmptyBody", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 204, Header: http.Header{}}))
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, 204, got.Response.StatusCode)
		require.Empty(t, got.Response.Body)
	})

	t.Run("WritesAreFencedByToken", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		stranger := store.Attempt{Scope: c.Scope, Key: c.Key, Token: claim("", "", "", 0, 0).Token}
		require.ErrorIs(t, s.Complete(ctx, stranger, store.Response{StatusCode: 200}), store.ErrNotHeld)
		require.ErrorIs(t, s.Fail(ctx, stranger), store.ErrNotHeld)
		require.ErrorIs(t, s.Renew(ctx, stranger, long), store.ErrNotHeld)

		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 200}))
		// Once completed, even the holder's token writes nothing more.
		require.ErrorIs(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 500}), store.ErrNotHeld)
		require.ErrorIs(t, s.Fail(ctx, c.Attempt()), store.ErrNotHeld)
		require.ErrorIs(t, s.Renew(ctx, c.Attempt(), long), store.ErrNotHeld)
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.Equal(t, 200, got.Response.StatusCode)
	})

	t.Run("FailReleasesForReacquire", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c.Attempt()))
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, got.Status)
		require.False(t, got.LeaseLive)

		retry := claim("alice", c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, retry, got.Token)
		require.NoError(t, err)
		require.True(t, won)
		got, err = s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, got.Status)
		require.Equal(t, 2, got.Attempts)
		require.Equal(t, retry.Token, got.Token)
		require.True(t, got.LeaseLive)
		// The first attempt is fenced out.
		require.ErrorIs(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201}), store.ErrNotHeld)
		require.NoError(t, s.Complete(ctx, retry.Attempt(), store.Response{StatusCode: 201}))
	})

	t.Run("ReacquireNeedsExpiredLock", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", 300*time.Millisecond, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		won, err := s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
		require.NoError(t, err)
		require.False(t, won, "a live lock cannot be taken over")

		waitUntil(t, func() bool {
			got, err := s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			return !got.LeaseLive
		})
		retry := claim("alice", c.Key, "body", long, ttl)
		won, err = s.Reacquire(ctx, retry, c.Token)
		require.NoError(t, err)
		require.True(t, won, "an expired lock is taken over")
		require.ErrorIs(t, s.Renew(ctx, c.Attempt(), long), store.ErrNotHeld, "the crashed attempt is fenced out")
	})

	t.Run("ReacquireWithStaleTokenLoses", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c.Attempt()))
		won, err := s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), "00000000-0000-0000-0000-000000000000")
		require.NoError(t, err)
		require.False(t, won)
	})

	t.Run("ReacquireCompletedLoses", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201}))
		won, err := s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
		require.NoError(t, err)
		require.False(t, won, "a completed record within retention is final")
	})

	t.Run("RenewExtendsLease", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", 2*time.Second, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		first, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.NoError(t, s.Renew(ctx, c.Attempt(), long))
		time.Sleep(time.Until(first.LeaseExpiresAt.Add(100 * time.Millisecond))) // past the first lease
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.True(t, got.LeaseLive, "a renewed lease outlives its first length")
		won, err := s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
		require.NoError(t, err)
		require.False(t, won)
	})

	t.Run("ExpiredRecordStartsAfresh", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, 300*time.Millisecond)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201, Body: []byte("old")}))
		var rec *store.Record
		waitUntil(t, func() bool {
			rec, err = s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			return rec.Expired
		})
		fresh := claim("alice", c.Key, "a different body", long, ttl)
		won, err := s.Reacquire(ctx, fresh, rec.Token)
		require.NoError(t, err)
		require.True(t, won, "a record past retention no longer binds its key")
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.Equal(t, fresh.Fingerprint, got.Fingerprint)
		require.Equal(t, 1, got.Attempts)
		require.Nil(t, got.Response)
		require.False(t, got.Expired)
		require.WithinDuration(t, got.CreatedAt.Add(ttl), got.ExpiresAt, time.Second)
	})

	t.Run("LiveLockOutlivesRetention", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// A lock that outlives the wait for the record's expiry, however
		// slow the machine.
		c := claim("alice", newKey(), "body", 5*time.Second, 300*time.Millisecond)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		waitUntil(t, func() bool {
			rec, err := s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			return rec.Expired
		})
		won, err := s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
		require.NoError(t, err)
		require.False(t, won, "past retention, a live lock still holds the key")
		waitUntil(t, func() bool {
			rec, err := s.Get(ctx, c.Scope, c.Key)
			require.NoError(t, err)
			return !rec.LeaseLive
		})
		won, err = s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
		require.NoError(t, err)
		require.True(t, won, "an abandoned claim past retention is taken over")
	})

	t.Run("ReacquireExtendsRetention", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, time.Second)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c.Attempt()))
		retry := claim("alice", c.Key, "body", long, ttl)
		won, err := s.Reacquire(ctx, retry, c.Token)
		require.NoError(t, err)
		require.True(t, won)
		got, err := s.Get(ctx, c.Scope, c.Key)
		require.NoError(t, err)
		require.WithinDuration(t, got.ClaimedAt.Add(ttl), got.ExpiresAt, time.Second,
			"a retry binds the key for at least a TTL after it began")
		require.Equal(t, 2, got.Attempts)
	})
}

// waitUntil polls cond until it holds, failing after a minute: generous,
// so that a slow, shared machine still passes.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
