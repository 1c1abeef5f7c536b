package pgstore_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
)

// TestFirstStatementRoundTrips: a handler's first statement goes to the
// database with the transaction's BEGIN in front, in one round trip,
// whether it is an Exec, a QueryRow or a batch. A fresh request then costs
// two round trips with the claim deferred or claiming first by the key's
// lock (the statement, behind the lock when claiming first; the key's
// insert with the COMMIT) and three leased (the claim, the statement, the
// completion with the COMMIT).
func TestFirstStatementRoundTrips(t *testing.T) {
	t.Parallel()
	const insert = `INSERT INTO payments (ref, amount) VALUES ($1, 100)`
	statements := map[string]func(r *http.Request) error{
		"Exec": func(r *http.Request) error {
			_, err := pgstore.DB(r.Context(), nil).Exec(r.Context(), insert, r.Header.Get("Idempotency-Key"))
			return err
		},
		"QueryRow": func(r *http.Request) error {
			var n int
			return pgstore.DB(r.Context(), nil).QueryRow(r.Context(), insert+` RETURNING amount`, r.Header.Get("Idempotency-Key")).Scan(&n)
		},
		"Batch": func(r *http.Request) error {
			b := &pgx.Batch{}
			b.Queue(insert, r.Header.Get("Idempotency-Key"))
			return pgstore.DB(r.Context(), nil).SendBatch(r.Context(), b).Close()
		},
	}
	modes := []struct {
		name  string
		cfg   idem.Config
		fresh int64
	}{
		{"Deferred", deferredCached, 2},
		{"ClaimFirst", idem.Config{Mode: idem.ModeAtomic, ReplayCacheBytes: 1 << 20}, 2},
		{"Leased", idem.Config{Mode: idem.ModeLeased, ReplayCacheBytes: 1 << 20}, 3},
	}
	for name, stmt := range statements {
		for _, m := range modes {
			t.Run(name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				w := newDeferredWallet(t)
				url := w.replica(t, m.cfg, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					if err := stmt(r); err != nil {
						http.Error(rw, err.Error(), http.StatusInternalServerError)
						return
					}
					rw.WriteHeader(http.StatusCreated)
				}))
				for i := range 2 { // prepares the statements
					require.Equal(t, http.StatusCreated, postDeferred(t, url, "warm-up-"+strconv.Itoa(i)).status)
				}
				before := w.trips.n.Load()
				key := uuid.NewString()
				require.Equal(t, http.StatusCreated, postDeferred(t, url, key).status)
				require.Equal(t, m.fresh, w.trips.n.Load()-before, "round trips of a fresh request")
				require.Equal(t, 1, w.rows(t, key))
			})
		}
	}
}

// TestFirstStatementUnbatchable: statements a batch cannot carry (several
// in one string without arguments, pgx's query options) still run first
// in the request's transaction, on their own.
func TestFirstStatementUnbatchable(t *testing.T) {
	t.Parallel()
	w := newDeferredWallet(t)
	url := w.replica(t, deferredCached, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		db, key := pgstore.DB(r.Context(), nil), r.Header.Get("Idempotency-Key")
		var err error
		switch r.URL.Query().Get("how") {
		case "several":
			_, err = db.Exec(r.Context(), `INSERT INTO payments (ref, amount) VALUES ('`+key+`', 100); SELECT 1`)
		case "simple":
			_, err = db.Exec(r.Context(), `INSERT INTO payments (ref, amount) VALUES ($1, 100)`, pgx.QueryExecModeSimpleProtocol, key)
		}
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		rw.WriteHeader(http.StatusCreated)
	}))
	for _, how := range []string{"several", "simple"} {
		key := uuid.NewString()
		a := send(t, url+"/v1/payments?how="+how, key, "application/json", `{"amount":100}`)
		require.Equal(t, http.StatusCreated, a.status, "%s: %s", how, a.body)
		require.Equal(t, 1, w.rows(t, key), how)
	}
}
