package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"

	"github.com/idem-dev/idem"
)

// postKey runs one keyed POST through h as user alice.
func postKey(h http.Handler, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount":100}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
	return rec
}

// A retry that succeeds near the end of retention extends it: the record
// it completes binds the key for at least a TTL more, so the client's next
// retry is replayed rather than executed again. Scaled down to a 4 s TTL:
// the retry begins half-way through retention and completes once the first
// record's retention is over.
func TestRetryNearRetentionEndIsStillReplayed(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var runs atomic.Int32
	const ttl = 4 * time.Second
	mw, err := idem.New(st, idem.Config{Mode: idem.ModeLeased, TTL: ttl, LeaseDuration: time.Second})
	require.NoError(t, err)
	var firstExpiry time.Time
	h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // the bank is down: FAILED, retriable
			return
		case 2:
			// The bank call of the successful retry, answered after the
			// first record's retention is over.
			time.Sleep(time.Until(firstExpiry.Add(100 * time.Millisecond)))
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":"p%d"}`, n)
	}))
	key := "ttl-" + t.Name()
	start := time.Now()
	require.Equal(t, http.StatusServiceUnavailable, postKey(h, key).Code)
	failed, err := st.Get(context.Background(), "alice", key)
	require.NoError(t, err)
	firstExpiry = failed.ExpiresAt
	time.Sleep(time.Until(start.Add(ttl / 2)))

	ok := postKey(h, key) // the retry that succeeds
	require.Equal(t, http.StatusCreated, ok.Code)
	require.Equal(t, `{"payment":"p2"}`, ok.Body.String())
	rec, err := st.Get(context.Background(), "alice", key)
	require.NoError(t, err)
	t.Logf("just completed: status %s, expires_at %s, expired %v", rec.Status, rec.ExpiresAt.Format(time.RFC3339Nano), rec.Expired)

	again := postKey(h, key) // its response was lost; the client retries at once
	require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"),
		"a retry right after a successful execution must replay it, not run the payment again (got %d %s)", again.Code, again.Body)
	require.Equal(t, int32(2), runs.Load(), "the payment ran twice")
}

// Past retention, a record whose lease is live and renewed is still in
// flight: a retry gets 409 rather than running the handler beside it.
func TestRetentionEndDoesNotStealALiveLease(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var (
		runs     atomic.Int32
		inFlight atomic.Int32
		overlap  atomic.Bool
	)
	release := make(chan struct{})
	// A lease far longer than its renewal interval, so that renewals get
	// through on a loaded machine and the lease stays live past retention.
	mw, err := idem.New(st, idem.Config{Mode: idem.ModeLeased, TTL: time.Second, LeaseDuration: 3 * time.Second})
	require.NoError(t, err)
	h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if inFlight.Add(1) > 1 {
			overlap.Store(true)
		}
		defer inFlight.Add(-1)
		if n == 2 {
			select { // a slow bank call, lease renewed all along
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	key := "steal-" + t.Name()
	require.Equal(t, http.StatusServiceUnavailable, postKey(h, key).Code)

	secondDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { secondDone <- postKey(h, key) }()
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := st.Get(context.Background(), "alice", key)
		require.NoError(t, err)
		if rec.Expired {
			require.Equal(t, store.StatusProcessing, rec.Status)
			require.True(t, rec.LeaseLive, "the second attempt's lease is live and renewed")
			break
		}
		require.True(t, time.Now().Before(deadline))
		time.Sleep(20 * time.Millisecond)
	}
	third := postKey(h, key)
	close(release)
	second := <-secondDone
	t.Logf("second attempt: %d, third attempt: %d", second.Code, third.Code)
	require.False(t, overlap.Load(), "two attempts of one key executed concurrently")
	require.Equal(t, http.StatusConflict, third.Code, "a live lease is in flight: 409")
}
