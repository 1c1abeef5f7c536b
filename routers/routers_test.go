package routers_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/adaptertest"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

// handler answers as the suite asks, the net/http way: an error is a
// response like any other.
func handler(answer func(*http.Request) adaptertest.Answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := answer(r)
		if a.Panic {
			panic("the ledger is on fire")
		}
		w.Header().Set("Content-Type", "application/json")
		if a.Location != "" {
			w.Header().Set("Location", a.Location)
		}
		w.WriteHeader(a.Status)
		if a.Error {
			fmt.Fprintf(w, `{"message":%q}`, a.Body)
			return
		}
		fmt.Fprint(w, a.Body)
	}
}

// authenticate puts the X-User header's user in the context, as
// idem.WithScope says.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-User"); u != "" {
			r = r.WithContext(idem.WithScope(r.Context(), u))
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer answers a panic with 500, as a ServeMux application's own
// recovery middleware does.
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

var adapters = map[string]adaptertest.Adapter{
	"EchoV4": {Route: "POST /v1/payments/:id", Mount: mountEchoV4},
	"ServeMux": {Route: "POST /v1/payments/{id}", Mount: func(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments/{id}", mw.Require(handler(answer)))
		return recoverer(authenticate(mux))
	}},
	// The middleware around the whole mux: the label is filled in once
	// the mux inside has routed the request.
	"ServeMuxWrapped": {Route: "POST /v1/payments/{id}", Mount: func(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/v1/payments/{id}", handler(answer))
		return recoverer(authenticate(mw.Require(mux)))
	}},
	"ChiRoute": {Route: "POST /v1/payments/{id}", Mount: func(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
		r := chi.NewRouter()
		r.Use(middleware.Recoverer, authenticate)
		r.With(mw.Require).Post("/v1/payments/{id}", handler(answer))
		return r
	}},
	"ChiRouter": {Route: "POST /v1/payments/{id}", Mount: func(t *testing.T, mw *idem.Middleware, answer func(*http.Request) adaptertest.Answer) http.Handler {
		r := chi.NewRouter()
		r.Use(middleware.Recoverer, authenticate, mw.Require)
		r.Post("/v1/payments/{id}", handler(answer))
		return r
	}},
}

func TestRoutersPostgreSQL(t *testing.T) {
	t.Parallel()
	for name, a := range adapters {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			adaptertest.Run(t, func(t *testing.T) store.Store {
				pool := pgtest.Pool(t, 4)
				_, err := pgstore.Migrate(context.Background(), pool)
				require.NoError(t, err)
				return pgstore.New(pool)
			}, a)
		})
	}
}

func TestRoutersSQLite(t *testing.T) {
	t.Parallel()
	for name, a := range adapters {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			adaptertest.Run(t, func(t *testing.T) store.Store {
				db, err := sqlitestore.Open(t.TempDir() + "/idem.db")
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				_, err = sqlitestore.Migrate(context.Background(), db)
				require.NoError(t, err)
				return sqlitestore.New(db)
			}, a)
		})
	}
}
