package sqlitestore_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/sqlitestore"
)

// TestLockedOutsideTheStore: while a connection outside the store (another
// process on the same file) holds the database's write lock, a fresh key
// waits for it and then gets 503 store-unavailable, not 409 in-flight: no
// request holds the key. Nothing is stored, so once the lock is gone the
// same key runs.
func TestLockedOutsideTheStore(t *testing.T) {
	t.Parallel()
	for _, mode := range []idem.Mode{idem.ModeAtomic, idem.ModeLeased} {
		t.Run(strings.ToUpper(mode.String()[:1])+mode.String()[1:], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, db := newStore(t)
			mw, err := idem.New(s, idem.Config{Mode: mode, WaitTimeout: 200 * time.Millisecond})
			require.NoError(t, err)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(w, `{"ok":true}`)
				})).ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
			}))
			defer srv.Close()
			post := func() *http.Response {
				req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "fresh")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				t.Cleanup(func() { resp.Body.Close() })
				return resp
			}

			foreign, err := reopen(t, db).Conn(ctx)
			require.NoError(t, err)
			defer foreign.Close()
			_, err = foreign.ExecContext(ctx, "BEGIN IMMEDIATE")
			require.NoError(t, err)

			resp := post()
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			var p struct{ Type string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
			require.Equal(t, idem.DefaultProblemTypeBase+string(idem.ProblemStoreUnavailable), p.Type)
			_, err = s.Get(ctx, "alice", "fresh")
			require.ErrorIs(t, err, store.ErrNotFound, "nothing stored")

			_, err = foreign.ExecContext(ctx, "ROLLBACK")
			require.NoError(t, err)
			resp = post()
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
		})
	}
}

// TestBusyOnlyWhenSQLiteSaysSo: ErrBusy says that a connection outside the
// store holds the write lock, so it is reported only when SQLite answered
// SQLITE_BUSY. A wait spent queueing for one of the pool's connections,
// with nothing outside holding the lock, is the store's own bounded wait:
// store.ErrWaitTimeout.
func TestBusyOnlyWhenSQLiteSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	insert := func(s store.Store) error {
		tx, err := s.Begin(ctx, store.TxOptions{MaxWait: 100 * time.Millisecond})
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, _, err = tx.Insert(ctx, newClaim(uuid.NewString()))
		return err
	}

	t.Run("PoolSaturatedIsNotBusy", func(t *testing.T) {
		t.Parallel()
		s, db := newStore(t)
		db.SetMaxOpenConns(1)
		// The pool's one connection is in use, reading: it holds no
		// write lock.
		c, err := db.Conn(ctx)
		require.NoError(t, err)
		defer c.Close()
		err = insert(s)
		require.ErrorIs(t, err, store.ErrWaitTimeout)
		require.NotErrorIs(t, err, sqlitestore.ErrBusy, "nothing outside the store holds the write lock")
	})

	t.Run("OutsideWriterIsBusy", func(t *testing.T) {
		t.Parallel()
		s, db := newStore(t)
		foreign, err := reopen(t, db).Conn(ctx)
		require.NoError(t, err)
		defer foreign.Close()
		_, err = foreign.ExecContext(ctx, "BEGIN IMMEDIATE")
		require.NoError(t, err)
		defer func() { _, _ = foreign.ExecContext(ctx, "ROLLBACK") }()
		err = insert(s)
		require.ErrorIs(t, err, sqlitestore.ErrBusy)
		require.NotErrorIs(t, err, store.ErrWaitTimeout, "no request of the store holds the key")
	})
}
