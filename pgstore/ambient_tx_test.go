package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

// When the request's transaction cannot begin (the client has gone, the
// pool is exhausted), the ambient Query returns Rows that carry the error,
// as a pool's or a transaction's does, so pgx's idiom
//
//	rows, _ := db.Query(ctx, sql)
//	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
//
// reports the error instead of panicking.
func TestAmbientQueryReturnsErrorRowsWhenBeginFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	tx, err := st.Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	gone, cancel := context.WithCancel(tx.Context(ctx))
	cancel() // the client went away before the handler's first query

	poolRows, poolErr := st.Pool().Query(gone, `SELECT 1`)
	require.Error(t, poolErr)
	require.NotNil(t, poolRows, "the pool returns Rows carrying the error")

	db := pgstore.DB(gone, st.Pool())
	require.NotPanics(t, func() {
		rows, _ := db.Query(gone, `SELECT 1`)
		_, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.Error(t, err)
	}, "the ambient transaction's Query must behave like the pool's when it cannot begin")
}

// A handler that ends the request's transaction itself (a ROLLBACK after a
// failed statement) cannot go on writing outside it: pgx would run every
// later statement in autocommit, apart from the key, and each retry would
// pay again. The store refuses statements once the transaction is gone.
func TestHandlerRollbackCannotWriteOutsideTheKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	pool := st.Pool()
	_, err := pool.Exec(ctx, `CREATE TABLE payments (ref text, amount bigint)`)
	require.NoError(t, err)
	mw, err := idem.New(st, idem.Config{Mode: idem.ModeAtomic})
	require.NoError(t, err)
	h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db := pgstore.DB(r.Context(), pool)
		// A lookup that fails and aborts the transaction, "recovered" by
		// rolling back before going on.
		if _, err := db.Exec(r.Context(), `SELECT 1/0`); err != nil {
			_, _ = db.Exec(r.Context(), `ROLLBACK`)
		}
		if _, err := db.Exec(r.Context(), `INSERT INTO payments VALUES ('p', 100)`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "paid")
	}))
	serve := func() int {
		req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "k1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
		return rec.Code
	}
	first := serve()
	second := serve()
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n))
	t.Logf("first %d, retry %d, payments %d", first, second, n)
	require.LessOrEqual(t, n, 1, "business writes committed outside the key's transaction: the payment was made twice")
}
