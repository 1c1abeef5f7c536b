package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// README.md's example: the body of Example is its main, and newServer,
// createPayment and authenticate are copied there as they are here. Keep
// the two in step; TestExample runs newServer.

// A payments server on PostgreSQL: the first request with a key runs, every
// retry gets its response back. (Compiled, not run: it serves until killed.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	handler, err := newServer(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", handler))
}

func newServer(ctx context.Context, pool *pgxpool.Pool) (http.Handler, error) {
	if _, err := pgstore.Migrate(ctx, pool); err != nil { // or run pgstore.MigrationSQL() with your own tool
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		return nil, err
	}
	mw, err := idem.New(pgstore.New(pool), idem.Config{}) // the zero Config: leased mode, 48 h TTL
	if err != nil {
		return nil, err // a bad Config fails here, never on a request
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw.Require(createPayment(pool)))
	return authenticate(mux), nil
}

// createPayment knows nothing of idempotency: pgstore.DB hands it the
// request's transaction, so its row commits with the key's record or not at all.
func createPayment(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct{ Amount int64 } // minor units, never a float
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Amount <= 0 {
			http.Error(w, "amount: a positive number of minor units", http.StatusBadRequest) // final: stored
			return
		}
		var id int64
		err := pgstore.DB(r.Context(), pool).QueryRow(r.Context(),
			`INSERT INTO payments (amount) VALUES ($1) RETURNING id`, p.Amount).Scan(&id)
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // not stored: the retry runs
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"amount":%d}`+"\n", id, p.Amount)
	})
}

// authenticate says whose request it is: every key is scoped by its user.
// A real one checks a credential; this one trusts a header.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), r.Header.Get("X-User"))))
	})
}

func TestExample(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	handler, err := newServer(ctx, pool)
	require.NoError(t, err)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)

	post := func(body string) (int, string, bool) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7")
		req.Header.Set("X-User", "user-42")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"
	}

	status, first, replayed := post(`{"amount":1000}`)
	require.Equal(t, http.StatusCreated, status, first)
	require.False(t, replayed)
	status, again, replayed := post(`{ "amount": 1000 }`)
	require.Equal(t, http.StatusCreated, status)
	require.True(t, replayed, "the retry is a replay")
	require.Equal(t, first, again, "byte for byte")
	status, _, _ = post(`{"amount":2000}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, "the key was used for another request")

	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows))
	require.Equal(t, 1, rows)
}
