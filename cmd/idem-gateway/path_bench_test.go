package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/idemprom"
)

// benchGateway is the gateway as serve wires it (Prometheus observers,
// logs at warn) on $DATABASE_URL's PostgreSQL, in front of an in-process
// upstream that reads the body and answers 201; extra are serve flags.
func benchGateway(b *testing.B, extra ...string) http.Handler {
	b.Helper()
	if os.Getenv("DATABASE_URL") == "" {
		b.Fatal("set DATABASE_URL to a PostgreSQL server: the gateway's fresh path is measured on pgstore")
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":1,"status":"completed"}`+"\n")
	}))
	b.Cleanup(up.Close)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	ups, specs, err := f.parse(fs, append([]string{"--upstream", up.URL, "--scope-credential-header", "X-User-ID", "--log-level", "warn"}, extra...), io.Discard, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	db, err := dburl.Resolve("", os.Getenv, defaultDB)
	if err != nil {
		b.Fatal(err)
	}
	ks, _, err := openMigrated(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ks.close)
	logger, err := f.log.Logger(io.Discard, "serve")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := idemprom.New(reg)
	g, err := newGateway(ks.store, ups, specs, f, f.replayCacheMB<<20, logger, observers{observe: m.Observe, trace: m.Trace}, reg)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

var benchRun atomic.Int64

// BenchmarkFresh is the gateway's fresh path: a new key per request,
// claimed, forwarded and completed on PostgreSQL, with logs at warn (as
// make bench runs it) and at info (the default: a line per request). Its
// allocs/op and B/op (the in-process upstream's and client's included) do
// not depend on the machine's load.
func BenchmarkFresh(b *testing.B) {
	for _, level := range []string{"warn", "info"} {
		b.Run("logs="+level, func(b *testing.B) { benchFresh(b, benchGateway(b, "--log-level", level)) })
	}
}

func benchFresh(b *testing.B, g http.Handler) {
	run := strconv.FormatInt(benchRun.Add(1), 10) + "-" + strconv.FormatInt(int64(os.Getpid()), 10)
	body := `{"amount":1234,"note":"bench"}`
	srv := httptest.NewServer(g)
	b.Cleanup(srv.Close)
	c := srv.Client()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/things", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-User-ID", "user-1")
		r.Header.Set("Idempotency-Key", "bench-"+run+"-"+strconv.Itoa(i))
		resp, err := c.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("answer %d", resp.StatusCode)
		}
	}
}

// BenchmarkRequestLine is what the gateway does with a request before the
// guard: normalise its line, check its headers, choose the upstream and
// the route, for the default routes and a path already normal (the common
// case: no allocation) and one to rewrite.
func BenchmarkRequestLine(b *testing.B) {
	var routes []*route
	for _, m := range strings.Split("POST /*,PATCH /*,PUT /*,DELETE /*,POST /v1/things,POST /v1/reports/*", ",") {
		p, err := parsePattern(m)
		if err != nil {
			b.Fatal(err)
		}
		routes = append(routes, &route{pattern: p, key: keyRequired})
	}
	ups := []*upstream{{prefix: "/"}, {prefix: "/v1/"}}
	for _, target := range []string{"/v1/things", "//v1/./things%2d1"} {
		b.Run(target, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, target, nil)
			for _, h := range []string{"Authorization", "Idempotency-Key", "Content-Type", "Accept", "User-Agent", "X-Request-Id"} {
				r.Header.Set(h, "x")
			}
			read := []string{"Authorization", "Idempotency-Key"}
			u := *r.URL
			b.ReportAllocs()
			for b.Loop() {
				*r.URL = u
				if why := normalise(r); why != "" {
					b.Fatal(why)
				}
				if why := headerAmbiguity(r, read); why != "" {
					b.Fatal(why)
				}
				if upstreamFor(ups, r) == nil || routeFor(routes, r) == nil {
					b.Fatal("no route")
				}
			}
		})
	}
}
