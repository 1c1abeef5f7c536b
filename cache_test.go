package idem

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

func completed(scope, key, body string, expires time.Time) *store.Record {
	return &store.Record{
		Scope: scope, Key: key, Status: store.StatusCompleted, ExpiresAt: expires,
		Fingerprint: store.Fingerprint{Version: FingerprintVersion, Method: "POST", Path: "/v1/p", Hash: []byte("h")},
		Response:    &store.Response{StatusCode: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)},
	}
}

func TestReplayCache(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	day := now.Add(24 * time.Hour)

	t.Run("HoldsCompletedRecordsByScopeAndKey", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, nil)
		rec := completed("alice", "k1", `{"id":1}`, day)
		c.put(rec, now)
		requireSameRecord(t, rec, c.get("alice", "k1", now))
		require.Nil(t, c.get("bob", "k1", now), "another user's key is another entry")
		require.Nil(t, c.get("alice", "k2", now))
	})

	t.Run("NeverHoldsOtherStates", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, nil)
		for _, rec := range []*store.Record{
			{Scope: "a", Key: "processing", Status: store.StatusProcessing, ExpiresAt: day},
			{Scope: "a", Key: "failed", Status: store.StatusFailed, ExpiresAt: day},
			func() *store.Record { r := completed("a", "expired", "x", day); r.Expired = true; return r }(),
		} {
			c.put(rec, now)
			require.Nil(t, c.get("a", rec.Key, now), rec.Key)
		}
	})

	t.Run("NeverHoldsWhatCacheableRefuses", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, func(r store.Response) bool { return r.StatusCode != 409 })
		open := completed("a", "open", "x", day)
		open.Response.StatusCode = 409
		c.put(open, now)
		require.Nil(t, c.get("a", "open", now), "an answer an operator may change is never cached")
		c.put(completed("a", "final", "x", day), now)
		require.NotNil(t, c.get("a", "final", now))
	})

	t.Run("NeverHoldsTheOutcomeUnknownAnswer", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, nil)
		open := completed("a", "open", `{"type":"`+store.OutcomeUnknownType+`"}`, day)
		open.Response.StatusCode = 409
		c.put(open, now)
		require.Nil(t, c.get("a", "open", now), "an operator may still release or replace it, from any process")
		other := completed("a", "conflict", `{"type":"about:blank"}`, day)
		other.Response.StatusCode = 409
		c.put(other, now)
		require.NotNil(t, c.get("a", "conflict", now), "any other final answer is cached")
	})

	t.Run("EntryEndsMarginBeforeRecordExpires", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, nil)
		expires := now.Add(10 * time.Minute)
		c.put(completed("a", "k", "x", expires), now)
		require.NotNil(t, c.get("a", "k", expires.Add(-time.Minute-time.Nanosecond)))
		require.Nil(t, c.get("a", "k", expires.Add(-time.Minute)), "the record may be re-acquired soon: go to the store")
		require.Zero(t, c.size, "an ended entry is dropped")

		c.put(completed("a", "soon", "x", now.Add(30*time.Second)), now)
		require.Nil(t, c.get("a", "soon", now), "too close to expiry to cache at all")
	})

	t.Run("EvictsLeastRecentlyUsedPastItsBytes", func(t *testing.T) {
		body := strings.Repeat("b", 1000)
		one := entryOverhead + int64(sizeCached(completed("a", "k0", body, day)).n)
		// Room for three, not four.
		c := newReplayCache(3*one+one/2, time.Minute, nil)
		for _, k := range []string{"k0", "k1", "k2"} {
			c.put(completed("a", k, body, day), now)
		}
		require.NotNil(t, c.get("a", "k0", now)) // k1 is now the least recent
		c.put(completed("a", "k3", body, day), now)
		require.Nil(t, c.get("a", "k1", now))
		for _, k := range []string{"k0", "k2", "k3"} {
			require.NotNil(t, c.get("a", k, now), k)
		}
		require.LessOrEqual(t, c.size, c.max)

		c.put(completed("a", "huge", strings.Repeat("b", int(c.max)), day), now)
		require.Nil(t, c.get("a", "huge", now), "larger than the whole cache")
		require.NotNil(t, c.get("a", "k3", now), "and evicts nothing")
	})

	t.Run("ReplacingAnEntryKeepsTheCount", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, nil)
		c.put(completed("a", "k", "x", day), now)
		size := c.size
		c.put(completed("a", "k", "x", day), now)
		require.Equal(t, size, c.size)
		require.Equal(t, 1, len(c.items))
	})

	t.Run("HoldsAnExpiryPastTheYear2262", func(t *testing.T) {
		c := newReplayCache(1<<20, time.Minute, nil)
		c.put(completed("a", "k", "x", time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)), now)
		require.NotNil(t, c.get("a", "k", now), "a TTL of centuries is still cached")
	})

	t.Run("NilCacheHoldsNothing", func(t *testing.T) {
		var c *replayCache
		c.put(completed("a", "k", "x", day), now)
		require.Nil(t, c.get("a", "k", now))
		require.Nil(t, newReplayCache(0, time.Minute, nil))
	})
}

// TestReplayCacheAndOperators: through a middleware with the zero Config
// (which caches), an operator's release or replacement of an outcome-unknown
// answer, the one answer an operator may change (store.Capabilities.Resolve), is
// what the next retry gets: that answer was never cached. Any other answer
// is, and its retry costs the store nothing.
func TestReplayCacheAndOperators(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	unknown := `{"type":"` + store.OutcomeUnknownType + `","status":409}`
	s := memstore.New()
	m, err := New(s, Config{})
	require.NoError(t, err)
	runs := map[string]int{}
	h := m.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		runs[key]++
		if strings.HasPrefix(key, "unknown") && runs[key] == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(unknown))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("ran " + strconv.Itoa(runs[key])))
	}))
	send := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/payouts", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", key)
		r = r.WithContext(WithScope(r.Context(), "alice"))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	attempt := func(key string) store.Attempt {
		rec, err := s.Get(ctx, "alice", key)
		require.NoError(t, err)
		require.True(t, store.AwaitsOperator(rec.Status, rec.Response))
		return store.Attempt{Scope: "alice", Key: key, Token: rec.Token}
	}

	require.Equal(t, http.StatusCreated, send("plain").Code)
	require.Equal(t, 1, m.ReplayCache().Entries, "the zero Config caches")

	t.Run("Release", func(t *testing.T) {
		require.Equal(t, http.StatusConflict, send("unknown-1").Code)
		require.Equal(t, http.StatusConflict, send("unknown-1").Code, "replayed from the store")
		require.NoError(t, s.Release(ctx, attempt("unknown-1")))
		w := send("unknown-1")
		require.Equal(t, http.StatusCreated, w.Code, "released: the retry runs afresh")
		require.Equal(t, "ran 2", w.Body.String())
	})
	t.Run("ReplaceResponse", func(t *testing.T) {
		require.Equal(t, http.StatusConflict, send("unknown-2").Code)
		require.NoError(t, s.ReplaceResponse(ctx, attempt("unknown-2"), store.Response{StatusCode: http.StatusOK, Body: []byte("paid")}))
		w := send("unknown-2")
		require.Equal(t, http.StatusOK, w.Code, "the operator's answer, not a cached one")
		require.Equal(t, "paid", w.Body.String())
		require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		require.Equal(t, 1, runs["unknown-2"])
	})
	require.Equal(t, 3, m.ReplayCache().Entries, "the answers after the operator's are cached: nobody changes them now")
	w := send("plain")
	require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	require.Equal(t, 1, runs["plain"])
}

// TestCachedRecordRoundTrip: what a replay needs of a record comes back
// from its encoding as it went in, and a record is never another key's.
func TestCachedRecordRoundTrip(t *testing.T) {
	day := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, rec := range []*store.Record{
		completed("alice", "k1", `{"id":1}`, day),
		completed("carol", "far", `{}`, time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)),
		func() *store.Record {
			r := completed("alice", "k2", `{}`, day)
			r.Response.Header = http.Header{}
			return r
		}(),
		func() *store.Record {
			r := completed("", "", "", day)
			r.Fingerprint = store.Fingerprint{Version: 2, Method: "PUT", Path: "/v1/p?q=é"}
			r.Response = &store.Response{StatusCode: 409, Body: []byte{},
				ResourceType: "payments", ResourceID: "p_1"}
			return r
		}(),
		func() *store.Record {
			r := completed("bob", strings.Repeat("k", 300), strings.Repeat("b", 70000), day)
			r.Response.Header = http.Header{"A": nil, "B": {}, "C": {"1", "2", ""}, "Set-Later": {strings.Repeat("v", 200)}}
			return r
		}(),
	} {
		b := encodeCached(rec, sizeCached(rec))
		require.Equal(t, len(b), cap(b), "the encoding's length is computed, not guessed")
		requireSameRecord(t, rec, decodeCached(b, rec.Scope, rec.Key))
		require.Nil(t, decodeCached(b, rec.Scope+"x", rec.Key), "another scope with the same hash")
		require.Nil(t, decodeCached(b, rec.Scope, rec.Key+"x"), "another key with the same hash")
	}
}

// requireSameRecord compares what a replay reads of a cached record.
func requireSameRecord(t *testing.T, want, got *store.Record) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.Scope, got.Scope)
	require.Equal(t, want.Key, got.Key)
	require.Equal(t, store.StatusCompleted, got.Status)
	require.Equal(t, want.Fingerprint.Version, got.Fingerprint.Version)
	require.Equal(t, want.Fingerprint.Method, got.Fingerprint.Method)
	require.Equal(t, want.Fingerprint.Path, got.Fingerprint.Path)
	require.True(t, bytes.Equal(want.Fingerprint.Hash, got.Fingerprint.Hash), "hash")
	expires := want.ExpiresAt
	if expires.After(lastNano) {
		expires = lastNano // the encoding's last instant
	}
	require.True(t, expires.Equal(got.ExpiresAt), "expiry %v, want %v", got.ExpiresAt, expires)
	require.Equal(t, *want.Response, *got.Response)
}

func TestCacheMargin(t *testing.T) {
	require.Equal(t, time.Minute, cacheMargin(48*time.Hour))
	require.Equal(t, 300*time.Millisecond, cacheMargin(3*time.Second))
}

// TestReplayCacheBytesIsWhatItCosts fills caches with records shaped as
// a request's completion leaves them (Middleware.remember) and compares
// the heap they hold with the bytes the cache counts: ReplayCacheBytes
// bounds the memory an operator sizes a process by.
func TestReplayCacheBytesIsWhatItCosts(t *testing.T) {
	now := time.Now()
	for _, shape := range []struct {
		name    string
		body    int
		headers int
	}{
		{"SmallJSON", 60, 2},
		{"LargerBody", 2000, 2},
		{"ManyHeaders", 200, 9},
	} {
		t.Run(shape.name, func(t *testing.T) {
			const max = 16 << 20
			m, err := New(memstore.New(), Config{ReplayCacheBytes: max, ReplayHeaders: []string{ReplayAllHeaders}})
			require.NoError(t, err)
			c := m.cache
			held := func() uint64 {
				var s runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&s)
				return s.HeapAlloc
			}
			before := held()
			for i := 0; len(c.items) == i; i++ {
				m.remember(rememberedRequest(m, i, shape.body, shape.headers, now))
			}
			used := held() - before
			ratio := float64(used) / float64(c.size)
			t.Logf("%d entries, counted %d B (%d a record), heap %d B: %.2f of the count", len(c.items), c.size, c.size/int64(len(c.items)), used, ratio)
			require.True(t, ratio > 0.8 && ratio < 1.1, "the heap the cache holds is %.2f of the bytes it counts", ratio)
			runtime.KeepAlive(m)
		})
	}
}

// rememberedRequest is the claim of the i-th request of a user, begun at
// now and completed with a response of body bytes and headers headers, as
// the capture and storedResponse leave them.
func rememberedRequest(m *Middleware, i, body, headers int, now time.Time) (store.Claim, time.Time, store.Response) {
	r := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount":100}`))
	fp, err := NewFingerprint(r, []byte(`{"amount":100}`))
	if err != nil {
		panic(err)
	}
	q := &request{start: now}
	q.claim = m.newClaim("user-"+strconv.Itoa(i%1000), "4f1c2a9e-0b7d-4e55-9c1a-"+strconv.Itoa(100000000000+i), fp)
	c := &q.first.captured
	*c = capture{header: make(http.Header), limit: 1 << 20}
	c.Header().Set("Content-Type", "application/json")
	c.Header().Set("Location", "/v1/payments/"+strconv.Itoa(i))
	for h := 2; h < headers; h++ {
		c.Header().Set("X-Extra-"+strconv.Itoa(h), "value-"+strconv.Itoa(i))
	}
	c.WriteHeader(http.StatusCreated)
	_, _ = c.Write(bytes.Repeat([]byte("b"), body))
	return q.claim, q.start, m.storedResponse(c)
}

// TestCacheMissReadsFirstWhenClaimLocksStore: on a store whose claim takes
// its write lock (store.Capabilities.ClaimLocksStore), a retry this process
// has not cached (another process answered it) is answered by a read that
// takes no lock; on another store the miss goes straight to the claim.
func TestCacheMissReadsFirstWhenClaimLocksStore(t *testing.T) {
	t.Parallel()
	for _, locks := range []bool{false, true} {
		s := claimLocks{Store: memstore.New(), locks: locks}
		var ops []Op
		trace := func(ctx context.Context, op Op) (context.Context, func(error)) {
			ops = append(ops, op)
			return ctx, func(error) {}
		}
		send := func(m *Middleware) *httptest.ResponseRecorder {
			h := m.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
			r := httptest.NewRequest(http.MethodPost, "/v1/payouts", strings.NewReader("{}"))
			r.Header.Set("Idempotency-Key", "k1")
			r = r.WithContext(WithScope(r.Context(), "alice"))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		first, err := New(s, Config{Mode: ModeLeased})
		require.NoError(t, err)
		second, err := New(s, Config{Mode: ModeLeased, TraceFunc: trace})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, send(first).Code)
		w := send(second)
		require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		want := []Op{OpInsert}
		if locks {
			want = []Op{OpGet}
		}
		require.Equal(t, want, ops, "ClaimLocksStore %v", locks)
	}
}

// claimLocks is memstore reporting, or not, that its claim takes the
// store's write lock.
type claimLocks struct {
	*memstore.Store
	locks bool
}

func (s claimLocks) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.ClaimLocksStore = s.locks
	return c
}
