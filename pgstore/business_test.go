package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

// payments is a handler that writes through the ambient transaction: a
// payments row whose key is unique, as a business table's last net.
func payments(pool *pgxpool.Pool, status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		_, err := pgstore.DB(r.Context(), pool).Exec(r.Context(),
			`INSERT INTO payments (ref, amount) VALUES ($1, 100)`, r.URL.Query().Get("ref"))
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
			// The transaction is aborted now; the middleware stores this 4xx
			// in a fresh one.
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, "duplicate payment")
			return
		}
		if err != nil {
			http.Error(w, "database error", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "paid %s", key)
	})
}

func setup(t *testing.T, mode idem.Mode, status int) (*pgxpool.Pool, *httptest.Server) {
	t.Helper()
	st := newStore(t)
	pool := st.Pool()
	_, err := pool.Exec(context.Background(), `CREATE TABLE payments (ref text UNIQUE, amount bigint)`)
	require.NoError(t, err)
	mw, err := idem.New(st, idem.Config{Mode: mode})
	require.NoError(t, err)
	h := mw.Require(payments(pool, status))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
	}))
	t.Cleanup(srv.Close)
	return pool, srv
}

func post(t *testing.T, srv *httptest.Server, key, ref string) (int, string) {
	t.Helper()
	a := send(t, srv.URL+"/pay?ref="+ref, key, "", "{}")
	return a.status, a.body
}

// answer is what a client saw of a response.
type answer struct {
	status   int
	body     string
	replayed bool
}

// send posts body with key (and ctype, when not empty) to url.
func send(t *testing.T, url, key, ctype, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

func TestBusinessWritesCommitWithKey(t *testing.T) {
	t.Parallel()
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run(strings.ToUpper(mode.String()[:1])+mode.String()[1:], func(t *testing.T) {
			t.Parallel()

			t.Run("FinalResponseCommitsWrites", func(t *testing.T) {
				t.Parallel()
				pool, srv := setup(t, mode, http.StatusCreated)
				status, _ := post(t, srv, "k1", "r1")
				require.Equal(t, http.StatusCreated, status)
				status, _ = post(t, srv, "k1", "r1")
				require.Equal(t, http.StatusCreated, status)
				require.Equal(t, 1, count(t, pool))
			})

			t.Run("ServerErrorRollsWritesBack", func(t *testing.T) {
				t.Parallel()
				pool, srv := setup(t, mode, http.StatusServiceUnavailable)
				for range 3 {
					status, _ := post(t, srv, "k1", "r1")
					require.Equal(t, http.StatusServiceUnavailable, status)
				}
				require.Equal(t, 0, count(t, pool), "a 5xx leaves no business write behind")
			})

			t.Run("AbortedTransactionStillStores4xx", func(t *testing.T) {
				t.Parallel()
				pool, srv := setup(t, mode, http.StatusCreated)
				status, _ := post(t, srv, "k1", "same-ref")
				require.Equal(t, http.StatusCreated, status)
				// Another key for the same payment: the business table's
				// unique index fires and aborts the transaction.
				status, body := post(t, srv, "k2", "same-ref")
				require.Equal(t, http.StatusConflict, status)
				require.Equal(t, "duplicate payment", body)
				status, body = post(t, srv, "k2", "same-ref")
				require.Equal(t, http.StatusConflict, status, "the 409 was stored as k2's final answer")
				require.Equal(t, "duplicate payment", body)
				require.Equal(t, 1, count(t, pool))
			})
		})
	}
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	t.Parallel()
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run(strings.ToUpper(mode.String()[:1])+mode.String()[1:], func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			ran := false
			mw, err := idem.New(st, idem.Config{Mode: mode})
			require.NoError(t, err)
			h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran = true }))
			st.Pool().Close() // the database is gone
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
			req.Header.Set("Idempotency-Key", "k1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			require.Contains(t, rec.Body.String(), "store-unavailable")
			// Leased mode claims before the handler runs. Claiming first
			// by the key's lock, the lock goes with the handler's first
			// statement: the handler starts, and nothing it does commits.
			require.Equal(t, mode == idem.ModeAtomic, ran, "the handler runs only where the claim goes with its first statement")
		})
	}
}

// Atomic mode needs READ COMMITTED: under REPEATABLE READ a waiting
// duplicate's claim would fail with a serialization error. The store asks
// for READ COMMITTED whatever the database's default.
func TestAtomicModeUnderRepeatableReadDefault(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	cfg := st.Pool().Config()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	rrPool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer rrPool.Close()
	tx, err := pgstore.New(rrPool).Begin(context.Background(), store.TxOptions{})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	var level string
	require.NoError(t, pgstore.DB(tx.Context(context.Background()), nil).
		QueryRow(context.Background(), `SHOW transaction_isolation`).Scan(&level))
	require.Equal(t, "read committed", level)
}

// A leased-mode handler that calls out (to a bank, say) and writes nothing
// holds no database connection while it waits: the transaction begins on
// its first statement.
func TestLeasedHandlerHoldsNoConnectionUntilItWrites(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	mw, err := idem.New(st, idem.Config{Mode: idem.ModeLeased})
	require.NoError(t, err)
	var held int32 = -1
	h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		held = st.Pool().Stat().AcquiredConns()
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, int32(0), held)
	got, err := st.Get(context.Background(), "alice", "k1")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, got.Status)
}
