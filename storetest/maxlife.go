package storetest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// runMaxLeaseLife checks that a leased handler that never returns holds its
// key no longer than Config.MaxLeaseLife plus one lease: a retry then runs,
// and the hung handler's late answer is never stored.
func runMaxLeaseLife(t *testing.T, newStore NewStoreFunc, cfg idem.Config) {
	t.Run("HungHandlerFreesKeyAfterMaxLeaseLife", func(t *testing.T) {
		t.Parallel()
		c := cfg
		c.Mode = idem.ModeLeased
		// Long enough that renewals get through on a loaded machine, so
		// that the maximum life, not a lapse, ends the hold.
		c.LeaseDuration = 2 * time.Second
		c.MaxLeaseLife = 2 * time.Second
		hang := make(chan struct{})
		causes := make(chan error, 1)
		s := newServer(t, newStore(t), c, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				// A bank call with no timeout: it ignores its context.
				go func() {
					<-r.Context().Done()
					causes <- context.Cause(r.Context())
				}()
				<-hang
			}
			created(w, r, n)
		})
		var once sync.Once
		release := func() { once.Do(func() { close(hang) }) }
		t.Cleanup(release) // before the server's own cleanup, which waits for the handler
		key := newKey()
		first := make(chan reply, 1)
		go func() { first <- s.do(t, call{keys: []string{key}, body: `{}`}) }()
		select {
		case cause := <-causes:
			require.ErrorIs(t, cause, idem.ErrLeaseMaxLife, "the hung handler is cancelled at its maximum life")
		case <-time.After(time.Minute):
			t.Fatal("the hung handler was never cancelled")
		}

		// Retry as a client would, honouring the 409s, until the key is free.
		retry := untilNot(t, s, http.StatusConflict, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusCreated, retry.status, "body: %s", retry.body)
		require.JSONEq(t, `{"id":"p2","amount":100}`, string(retry.body))

		release() // the hung handler answers at last: too late to count
		late := <-first
		require.Equal(t, http.StatusConflict, late.status)
		require.Equal(t, "lease-lost", problemType(t, late))
		again := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		require.Equal(t, retry.body, again.body, "the record keeps the retry's answer")
		rec, err := s.store.Get(context.Background(), "alice", key)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
	})

	t.Run("LateAnswerPastMaxLeaseLifeIsNotStored", func(t *testing.T) {
		t.Parallel()
		c := cfg
		c.Mode = idem.ModeLeased
		c.LeaseDuration = 2 * time.Second
		c.MaxLeaseLife = 2 * time.Second
		s := newServer(t, newStore(t), c, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				<-r.Context().Done() // answers only once cancelled, and then as if it succeeded
			}
			created(w, r, n)
		})
		key := newKey()
		r := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusConflict, r.status)
		require.Equal(t, "lease-lost", problemType(t, r))
		rec, err := s.store.Get(context.Background(), "alice", key)
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, rec.Status, "released, not completed")
		retry := s.do(t, call{keys: []string{key}, body: `{}`})
		require.Equal(t, http.StatusCreated, retry.status)
		require.JSONEq(t, `{"id":"p2","amount":100}`, string(retry.body))
	})
}

// untilNot sends c until the answer's status is not status, waiting as
// the answer's Retry-After asks (at most a second between tries), for at
// most a minute.
func untilNot(t *testing.T, s *server, status int, c call) reply {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := s.do(t, c)
		if r.status != status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d after a minute: %s", status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
