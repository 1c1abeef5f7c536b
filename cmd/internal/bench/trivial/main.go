// Command trivial is the benchmark's simplest handler, served bare and
// behind the idem middleware in each way of holding a key, so that make
// bench can state what idempotency costs when the handler costs almost
// nothing: it decodes a small JSON body, runs one INSERT into a table of
// its own (bench_trivial, created by the benchmark) and answers 201.
//
//	trivial -db URL -listen WIRING=ADDR[,WIRING=ADDR...] [-pprof ADDR]
//
// A wiring is bare (no idempotency) or an idem.Mode's name: atomic-deferred
// (the claim deferred to the completion), atomic (claiming before the
// handler) or leased, each with paymentsd's replay cache of 64 MiB; the same with a -nocache
// suffix has none. Every wiring listens on an address of its own, since a
// key's fingerprint holds the path, and answers GET /healthz. The scope of
// a key is the X-User-ID header: no authentication look-up, so the handler
// really is trivial.
//
// It uses only what every version of the core has had (idem.New,
// idem.Config's Mode, ReplayCacheBytes and ScopeFunc,
// pgstore.New and pgstore.DB), and package roundtrip, so that the benchmark
// can build it from an earlier tree too, the two placed in it by an overlay
// (Config.Baseline in cmd/internal/bench). GET /roundtrips answers its
// count of round trips to PostgreSQL.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // for -pprof
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/roundtrip"
	"github.com/idem-dev/idem/pgstore"
)

// poolConns is paymentsd's pool size, as every server of the benchmark has.
const poolConns = 20

// replayCacheBytes is paymentsd's default replay cache.
const replayCacheBytes = 64 << 20

// ScopeHeader names the user a request belongs to.
const ScopeHeader = "X-User-ID"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "trivial:", err)
		os.Exit(1)
	}
}

func run() error {
	db := flag.String("db", "", "PostgreSQL URL")
	listen := flag.String("listen", "", "comma-separated WIRING=ADDR: bare, atomic-deferred, atomic or leased, optionally with -nocache")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address too")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(*db)
	if err != nil {
		return err
	}
	cfg.MaxConns = poolConns
	trips := &roundtrip.Counter{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	var servers []*http.Server
	errc := make(chan error, 1)
	for _, wa := range strings.Split(*listen, ",") {
		wiring, addr, ok := strings.Cut(wa, "=")
		if !ok {
			return fmt.Errorf("-listen %q: want WIRING=ADDR", wa)
		}
		h, err := handler(pool, wiring)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("POST /v1/things", h)
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
		mux.HandleFunc("GET /roundtrips", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprint(w, trips.Count())
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				select {
				case errc <- err:
				default:
				}
			}
		}()
	}
	if *pprofAddr != "" {
		pl, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return err
		}
		// http.DefaultServeMux carries net/http/pprof's handlers.
		go func() { _ = http.Serve(pl, http.DefaultServeMux) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(sctx)
	}
	return nil
}

// handler is the trivial handler in wiring.
func handler(pool *pgxpool.Pool, wiring string) (http.Handler, error) {
	h := insert(pool)
	if wiring == "bare" {
		return h, nil
	}
	name, noCache := strings.CutSuffix(wiring, "-nocache")
	c := idem.Config{
		ScopeFunc:        func(r *http.Request) string { return r.Header.Get(ScopeHeader) },
		ReplayCacheBytes: replayCacheBytes,
	}
	if noCache {
		c.ReplayCacheBytes = -1 // no cache
	}
	switch name {
	case "atomic-deferred":
		c.Mode = idem.ModeAtomicDeferred
	case "atomic":
		c.Mode = idem.ModeAtomic
	case "leased":
		c.Mode = idem.ModeLeased
	default:
		return nil, fmt.Errorf("unknown wiring %q", wiring)
	}
	m, err := idem.New(pgstore.New(pool), c)
	if err != nil {
		return nil, err
	}
	return m.Require(h), nil
}

// thing is the request's body.
type thing struct {
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

// insert decodes a thing, inserts it and answers 201 with its id.
func insert(pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var t thing
		if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var id int64
		err := pgstore.DB(r.Context(), pool).QueryRow(r.Context(),
			`INSERT INTO bench_trivial (user_id, amount, note) VALUES ($1, $2, $3) RETURNING id`,
			r.Header.Get(ScopeHeader), t.Amount, t.Note).Scan(&id)
		if err != nil {
			http.Error(w, "insert failed", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/things/"+strconv.FormatInt(id, 10))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(struct {
			ID int64 `json:"id"`
			thing
		}{id, t})
	}
}
