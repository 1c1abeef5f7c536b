// Command crashserver is a minimal payments server for the crash test: it
// SIGKILLs itself at a chosen point of its first idempotent request, so the
// test can restart it, retry the same key, and count business effects.
//
// The points, in request order:
//
//	claimed    the key is claimed; the handler has done nothing yet
//	handler    the handler has made half of its writes
//	written    the handler has made all its writes, not yet committed
//	committed  the writes and the key's completion are committed; the
//	           response has not been sent
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
)

const schema = `
CREATE TABLE IF NOT EXISTS payments (
    user_id         text   NOT NULL,
    idempotency_key text   NOT NULL,
    amount          bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts (
    user_id text   PRIMARY KEY,
    balance bigint NOT NULL
)`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashserver:", err)
		os.Exit(1)
	}
}

func run() error {
	db := flag.String("db", "", "PostgreSQL connection string")
	modeName := flag.String("mode", "atomic", "idempotency mode: leased, atomic or atomic-deferred")
	crashAt := flag.String("crash-at", "", "where to SIGKILL itself: claimed, handler, written or committed")
	leaseDuration := flag.Duration("lease-duration", time.Second, "lease of a leased-mode claim")
	flag.Parse()
	mode, err := idem.ParseMode(*modeName)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *db)
	if err != nil {
		return err
	}
	if _, err := pgstore.Migrate(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		return err
	}
	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: mode, LeaseDuration: *leaseDuration})
	if err != nil {
		return err
	}
	crash := func(point string) {
		if point == *crashAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		crash("claimed")
		var req struct{ Amount int64 }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 {
			http.Error(w, "bad amount", http.StatusBadRequest)
			return
		}
		user, key := idem.ScopeFromContext(r.Context()), r.Header.Get("Idempotency-Key")
		db := pgstore.DB(r.Context(), pool)
		if _, err := db.Exec(r.Context(), `INSERT INTO payments VALUES ($1, $2, $3)`, user, key, req.Amount); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		crash("handler")
		if _, err := db.Exec(r.Context(), `INSERT INTO accounts VALUES ($1, $2)
			ON CONFLICT (user_id) DO UPDATE SET balance = accounts.balance + EXCLUDED.balance`, user, req.Amount); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		crash("written")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"key":%q,"amount":%d,"at":%q}`, key, req.Amount, time.Now().Format(time.RFC3339Nano))
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(idem.WithScope(r.Context(), r.Header.Get("X-User")))
		mw.Require(pay).ServeHTTP(crashingWriter{w, crash}, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	return http.Serve(ln, handler)
}

// crashingWriter sits outside the middleware, which writes to it only
// after the commit: the "committed" point.
type crashingWriter struct {
	http.ResponseWriter
	crash func(string)
}

func (w crashingWriter) WriteHeader(code int) {
	if code == http.StatusCreated {
		w.crash("committed")
	}
	w.ResponseWriter.WriteHeader(code)
}
