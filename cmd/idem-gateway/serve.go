package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/cmd/internal/conns"
	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/cmd/internal/otlp"
	"github.com/idem-dev/idem/idemprom"
	"github.com/idem-dev/idem/limits"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// defaultMaxHeaderBytes is nginx's bound (four 8 KiB buffers): the
// upstream's clients may send cookies and tokens larger than paymentsd's.
const defaultMaxHeaderBytes = 32 << 10

// serveFlags are serve's flags. The first group is every server's; the
// second the simple case of one upstream, which a configuration file
// (--config) replaces.
type serveFlags struct {
	config, addr, db, metricsAddr  string
	consoleToken                   string
	otlpEndpoint                   string
	log                            cli.Log
	shutdownTimeout, sweepInterval time.Duration
	bodyTimeout                    time.Duration
	bodyMemoryMB                   int64
	conns                          conns.Limits
	requestsPerScope               int
	replayCacheMB                  int64
	upstream, routes               string
	scopeHeader, scopeCredential   string
	scopeTrusted                   string
	upstreamTimeout, leaseDuration time.Duration
	ttl                            time.Duration
	maxBody                        int64
	dedups                         bool
}

// simpleFlags are the flags a configuration file replaces.
var simpleFlags = []string{"upstream", "routes", "scope-header", "scope-credential-header", "scope-trusted-header", "upstream-timeout", "lease-duration", "lock-timeout", "idempotency-ttl", "max-body-bytes", "upstream-dedups"}

// fileFlags maps the configuration file's global settings to the flags
// they are the file's form of.
var fileFlags = []struct {
	field string
	value func(*fileSettings) string
	flag  string
}{
	{"addr", func(s *fileSettings) string { return s.Addr }, "addr"},
	{"db", func(s *fileSettings) string { return s.DB }, "db"},
	{"metrics_addr", func(s *fileSettings) string { return s.MetricsAddr }, "metrics-addr"},
	{"otlp_endpoint", func(s *fileSettings) string { return s.OTLPEndpoint }, "otlp-endpoint"},
	{"log.level", func(s *fileSettings) string { return s.Log.Level }, "log-level"},
	{"log.format", func(s *fileSettings) string { return s.Log.Format }, "log-format"},
	{"shutdown_timeout", func(s *fileSettings) string { return s.ShutdownTimeout }, "shutdown-timeout"},
	{"sweep_interval", func(s *fileSettings) string { return s.SweepInterval }, "sweep-interval"},
	{"limits.body_timeout", func(s *fileSettings) string { return s.Limits.BodyTimeout }, "body-timeout"},
	{"limits.body_memory_mb", func(s *fileSettings) string { return nonZero(s.Limits.BodyMemoryMB) }, "body-memory-mb"},
	{"limits.requests_per_scope", func(s *fileSettings) string { return nonZero(int64(s.Limits.RequestsPerScope)) }, "requests-per-scope"},
	{"limits.header_timeout", func(s *fileSettings) string { return s.Limits.HeaderTimeout }, "header-timeout"},
	{"limits.max_header_bytes", func(s *fileSettings) string { return nonZero(int64(s.Limits.MaxHeaderBytes)) }, "max-header-bytes"},
	{"limits.max_conns", func(s *fileSettings) string { return nonZero(int64(s.Limits.MaxConns)) }, "max-conns"},
	{"limits.max_conns_per_source", func(s *fileSettings) string { return nonZero(int64(s.Limits.MaxConnsPerSource)) }, "max-conns-per-source"},
	{"limits.max_idle_conns", func(s *fileSettings) string { return nonZero(int64(s.Limits.MaxIdleConns)) }, "max-idle-conns"},
	{"limits.idle_timeout", func(s *fileSettings) string { return s.Limits.IdleTimeout }, "idle-timeout"},
	{"replay_cache_mb", func(s *fileSettings) string {
		if s.ReplayCacheMB == nil {
			return ""
		}
		return fmt.Sprint(*s.ReplayCacheMB)
	}, "replay-cache-mb"},
}

func nonZero(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "a YAML configuration file: upstreams, routes and every setting below (docs/gateway.md);\na flag given on the command line overrides the file's setting")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8081", "the address to listen on; port 0 picks a free port")
	cli.Alias(fs, "listen", "addr")
	fs.StringVar(&f.db, "db", "", "the key store: a postgres:// URL, a mysql:// URL or user@tcp(host:3306)/db DSN, or a SQLite file path\n(default $DATABASE_URL, else "+defaultDB+" in the working directory)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "where to serve GET /metrics (Prometheus), /healthz and /readyz, never on --addr (default none)")
	fs.StringVar(&f.consoleToken, "console-token-file", "", "a file holding the operator console's admin token, at least 16 bytes, served at /console/ on\n--metrics-addr, never on --addr (docs/console.md); default none: no console")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "an OpenTelemetry collector's OTLP/HTTP base URL, such as http://127.0.0.1:4318: the guard's spans\nand metrics are exported there (default none)")
	f.log.Register(fs)
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long to wait for in-flight requests")
	fs.DurationVar(&f.sweepInterval, "sweep-interval", sweeper.DefaultInterval, "how often to delete the records past their retention; 0 turns the sweeper off\n(with several replicas, one sweeps at a time)")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", limits.DefaultBodyTimeout, "how long a guarded request's body may take to arrive; a slower one gets 408 and nothing is stored")
	fs.Int64Var(&f.bodyMemoryMB, "body-memory-mb", limits.DefaultBodyMemory>>20, "megabytes of guarded request bodies in flight at once; past it, 503 with Retry-After, nothing stored")
	fs.IntVar(&f.requestsPerScope, "requests-per-scope", limits.DefaultRequestsPerScope, "how many guarded requests one scope may have in flight; past it, 429 with Retry-After")
	f.conns = conns.Limits{HeaderTimeout: conns.DefaultHeaderTimeout, MaxHeaderBytes: defaultMaxHeaderBytes, MaxConns: conns.DefaultMaxConns,
		MaxIdleConns: conns.DefaultMaxIdleConns, IdleTimeout: conns.DefaultIdleTimeout}
	f.conns.Register(fs)
	fs.Int64Var(&f.replayCacheMB, "replay-cache-mb", 64, "megabytes of completed answers kept in memory, so that a retry costs no round trip (never an\noutcome-unknown answer, which an operator may still resolve); 0 turns it off")
	fs.StringVar(&f.upstream, "upstream", "", "the service's base URL (required without --config)")
	fs.StringVar(&f.routes, "routes", "POST /*,PATCH /*,PUT /*,DELETE /*", "the guarded routes, key required: comma-separated 'METHOD /path', a trailing * matches any rest")
	fs.StringVar(&f.scopeHeader, "scope-header", "", "the header whose value's SHA-256 scopes the keys: Authorization (the default), its scheme's case ignored;\na guarded request without it is refused (401)")
	fs.StringVar(&f.scopeCredential, "scope-credential-header", "", "instead of Authorization, the header of the credential the upstream authenticates by, such as\nX-Api-Key: its value's SHA-256 scopes the keys")
	fs.StringVar(&f.scopeTrusted, "scope-trusted-header", "", "instead of Authorization, a header an authenticating proxy in front sets (stripping the client's),\nsuch as X-User-Id: its value scopes the keys as is")
	fs.DurationVar(&f.upstreamTimeout, "upstream-timeout", defaultUpstreamTimeout, "how long the upstream may take to send its response headers")
	fs.DurationVar(&f.leaseDuration, "lease-duration", idem.DefaultLeaseDuration, "the lease of a request in flight: after a crash, a retry may take the key over after this long")
	cli.Alias(fs, "lock-timeout", "lease-duration")
	fs.DurationVar(&f.ttl, "idempotency-ttl", idem.DefaultTTL, "how long a key binds its first answer")
	fs.Int64Var(&f.maxBody, "max-body-bytes", idem.DefaultMaxRequestBytes, "the largest guarded request body; larger: 413")
	fs.BoolVar(&f.dedups, "upstream-dedups", false, "the upstream deduplicates on the forwarded Idempotency-Key, so a request whose outcome is unknown may be sent again")
}

// parse reads the command line and the configuration file into the
// settings of the upstreams and routes.
func (f *serveFlags) parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]*upstream, []routeSpec, error) {
	if err := cli.ParseFlags(fs, args, stdout, "idem-gateway", serveSynopsis); err != nil {
		return nil, nil, err
	}
	cli.WarnDeprecated(fs, stderr, "idem-gateway")
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["listen"] {
		set["addr"] = true
	}
	var s *fileSettings
	if f.config == "" {
		if err := f.checkScope(); err != nil {
			return nil, nil, err
		}
		s = f.simple()
	} else {
		for _, name := range simpleFlags {
			if set[name] {
				return nil, nil, cli.Usagef("--%s: with --config, the upstreams and routes are the file's", name)
			}
		}
		var err error
		if s, err = readSettings(f.config); err != nil {
			return nil, nil, cli.Usagef("--config %s: %v", f.config, err)
		}
		for _, ff := range fileFlags {
			if v := ff.value(s); v != "" && !set[ff.flag] {
				if err := fs.Set(ff.flag, v); err != nil {
					return nil, nil, cli.Usagef("--config %s: %s %q: %v", f.config, ff.field, v, err)
				}
			}
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"shutdown-timeout", f.shutdownTimeout}, {"body-timeout", f.bodyTimeout}} {
		if d.v <= 0 {
			return nil, nil, cli.Usagef("--%s must be positive, got %v", d.name, d.v)
		}
	}
	if f.sweepInterval < 0 || f.replayCacheMB < 0 || f.bodyMemoryMB <= 0 || f.requestsPerScope <= 0 {
		return nil, nil, cli.Usagef("--sweep-interval and --replay-cache-mb must not be negative, --body-memory-mb and --requests-per-scope must be positive")
	}
	if err := f.conns.Check(); err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	ups, err := parseUpstreams(s.Upstreams)
	if err != nil {
		return nil, nil, f.settingError(err)
	}
	if _, err := s.Defaults.Scope.source(); err != nil {
		return nil, nil, f.settingError(fmt.Errorf("defaults.scope: %w", err))
	}
	specs := make([]routeSpec, 0, len(s.Routes))
	for i, r := range s.Routes {
		spec, err := r.merged(s.Defaults).spec(fmt.Sprintf("routes[%d]", i))
		if err != nil {
			return nil, nil, f.settingError(err)
		}
		specs = append(specs, spec)
	}
	if err := checkRoutes(specs); err != nil {
		return nil, nil, f.settingError(err)
	}
	return ups, specs, nil
}

// settingError names where a bad setting came from.
func (f *serveFlags) settingError(err error) error {
	if f.config == "" {
		// The simple case's settings are flags: name them so.
		msg := strings.NewReplacer("upstreams: at least one is required", "--upstream is required (or --config FILE)", "upstreams[0].url", "--upstream", ".match", "", "routes[", "--routes[").Replace(err.Error())
		return cli.Usagef("%s", msg)
	}
	return cli.Usagef("--config %s: %v", f.config, err)
}

// checkScope checks the scope flags as scopeSettings.source checks the
// file's, in the flags' words.
func (f *serveFlags) checkScope() error {
	switch h := f.scopeHeader; {
	case given(f.scopeHeader, f.scopeCredential, f.scopeTrusted) > 1:
		return cli.Usagef("give one of --scope-header, --scope-credential-header or --scope-trusted-header")
	case h != "" && !credentialHeader(h):
		return cli.Usagef("%v", notCredential("--scope-header "+h, h, "give --scope-credential-header "+h, "--scope-trusted-header "+h))
	}
	return nil
}

// simple is the configuration the simple case's flags describe: one
// upstream, every route key required.
func (f *serveFlags) simple() *fileSettings {
	s := &fileSettings{Defaults: routeSettings{
		TTL: f.ttl.String(), Lease: f.leaseDuration.String(), UpstreamTimeout: f.upstreamTimeout.String(),
		UpstreamDedups: &f.dedups, MaxBodyBytes: f.maxBody,
		Scope: scopeSettings{Header: f.scopeHeader, CredentialHeader: f.scopeCredential, TrustedHeader: f.scopeTrusted},
	}}
	if f.upstream != "" {
		s.Upstreams = []upstreamSettings{{URL: f.upstream}}
	}
	for _, p := range strings.Split(f.routes, ",") {
		s.Routes = append(s.Routes, routeSettings{Match: p})
	}
	return s
}

const serveSynopsis = `idem-gateway [serve] [--config FILE | --upstream URL [--routes 'POST /v1/*,…']] [flags]

Puts the idem contract in front of any HTTP service: claims each guarded request's Idempotency-Key,
forwards the first request, stores its final answer and replays it to every retry. Other commands:
migrate, keys (see 'idem-gateway --help'); docs/gateway.md has the configuration file's schema.`

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	ups, specs, err := f.parse(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if f.consoleToken != "" && f.metricsAddr == "" {
		return cli.Usagef("serve: --console-token-file needs --metrics-addr: the console is served on the admin listener only")
	}
	db, err := dburl.Resolve(f.db, getenv, defaultDB)
	if err != nil {
		return err
	}
	logger, err := f.log.Logger(stderr, "serve")
	if err != nil {
		return err
	}
	// From here on every line is the logger's, the last one too.
	if err := serveOn(ctx, f, db, ups, specs, logger); err != nil {
		logger.Error("idem-gateway stopped", "err", err)
		return cli.Logged(err)
	}
	return nil
}

// serveOn binds the listeners, opens and migrates the key store, and
// serves until ctx ends, then drains.
func serveOn(ctx context.Context, f serveFlags, db dburl.DB, ups []*upstream, specs []routeSpec, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	defer ln.Close()
	var mln net.Listener
	if f.metricsAddr != "" {
		if mln, err = net.Listen("tcp", f.metricsAddr); err != nil {
			return fmt.Errorf("listen on %s (--metrics-addr): %w", f.metricsAddr, err)
		}
		defer mln.Close()
	}
	ks, applied, err := openMigrated(ctx, db)
	if err != nil {
		return err
	}
	defer ks.close()
	logger.Info("key store ready", "store", string(db.Kind), "db", db.String(), "migrations_applied", fmt.Sprint(applied))
	if ks.durability != nil {
		d, err := ks.durability(ctx)
		switch {
		case err != nil:
			logger.Warn("durability not checked", "err", err)
		case d.Warning() != "":
			logger.Warn(d.Warning(), "db", db.String())
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if ks.trips != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idem_gateway_postgres_round_trips_total",
			Help: "Round trips to PostgreSQL: each statement sent alone, and each pipelined batch, is one.",
		}, func() float64 { return float64(ks.trips.Count()) }))
	}
	m := idemprom.New(reg)
	obs := observers{observe: m.Observe, trace: m.Trace, sweep: m.ObserveSweep}
	if f.otlpEndpoint != "" {
		tel, stop, err := otlp.Start(ctx, f.otlpEndpoint, "idem-gateway")
		if err != nil {
			return err
		}
		// The exporters flush on the way out, after the drain.
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := stop(sctx); err != nil {
				logger.Warn("otlp: flush on shutdown failed", "err", err)
			}
		}()
		obs.start, obs.observe, obs.trace = tel.Start, idem.ObserveAll(obs.observe, tel.Observe), idem.TraceAll(obs.trace, tel.Trace)
		obs.sweep = func(b sweeper.Batch) { m.ObserveSweep(b); tel.ObserveSweep(b) }
		logger.Info("exporting spans and metrics over OTLP", "endpoint", f.otlpEndpoint)
	}
	g, err := newGateway(ks.store, ups, specs, f, f.replayCacheMB<<20, logger, obs, reg)
	if err != nil {
		return err
	}
	for _, u := range g.unguarded() {
		logger.Info("unguarded", "route", u.route, "why", u.why)
	}
	con, err := newConsole(f, ks.store, g)
	if err != nil {
		return err
	}

	sweepDone := make(chan struct{})
	sctx, stopSweep := context.WithCancel(ctx)
	defer func() { stopSweep(); <-sweepDone }()
	if ks.store.Capabilities().Sweep && f.sweepInterval > 0 {
		sw, err := sweeper.New(ks.store, sweeper.Config{Interval: f.sweepInterval, ObserveFunc: obs.sweep, Logger: logger})
		if err != nil {
			return err
		}
		go func() {
			defer close(sweepDone)
			_ = sw.Run(sctx) // it logs its own failures and ends with ctx
		}()
	} else {
		close(sweepDone)
	}

	errc := make(chan error, 2)
	srv := f.conns.Server(g, slog.NewLogLogger(logger.Handler(), slog.LevelWarn))
	go func() { errc <- srv.Serve(f.conns.Listener(ln)) }()
	attrs := []any{"url", "http://" + ln.Addr().String(), "store", string(db.Kind), "routes", len(specs), "upstreams", len(ups)}
	if mln != nil {
		mux := adminMux(reg, ks)
		if con != nil {
			mux.Handle("/console/", http.StripPrefix("/console", con))
			cctx, stopConsole := context.WithCancel(ctx)
			defer stopConsole()
			go func() { _ = con.Run(cctx) }()
			logger.Info("operator console", "url", "http://"+mln.Addr().String()+"/console/")
		}
		asrv := &http.Server{Handler: mux, ReadHeaderTimeout: f.conns.HeaderTimeout, MaxHeaderBytes: f.conns.MaxHeaderBytes, ErrorLog: srv.ErrorLog}
		go func() { errc <- asrv.Serve(mln) }()
		defer asrv.Close()
		attrs = append(attrs, "admin", "http://"+mln.Addr().String())
	}
	logger.Info("listening", attrs...)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Drain: stop accepting, let every guarded request finish (and its key
	// complete), then close the store.
	return cli.Drain(srv, f.shutdownTimeout, logger)
}

// newGateway builds the proxy: each route's middleware on the key store
// st, and one connection pool per upstream timeout.
// The replay cache, cacheBytes, is shared out among the guarded routes.
func newGateway(st store.Store, ups []*upstream, specs []routeSpec, f serveFlags, cacheBytes int64, logger *slog.Logger, obs observers, reg prometheus.Registerer) (*gateway, error) {
	lim, err := limits.New(limits.Config{BodyTimeout: f.bodyTimeout, BodyMemory: f.bodyMemoryMB << 20, RequestsPerScope: f.requestsPerScope})
	if err != nil {
		return nil, err
	}
	g := &gateway{upstreams: ups, limiter: lim, logger: logger, open: map[*upstream]*httputil.ReverseProxy{},
		unknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_gateway_outcome_unknown_total",
			Help: "Requests whose upstream outcome is unknown, stored as such for an operator to resolve, by route.",
		}, []string{"route"})}
	reg.MustRegister(g.unknown)
	transports := map[time.Duration]*http.Transport{}
	transport := func(d time.Duration) *http.Transport {
		if transports[d] == nil {
			transports[d] = newTransport(d)
		}
		return transports[d]
	}
	for _, up := range ups {
		g.open[up] = g.newProxy(up, transport(0), false)
	}
	guarded := 0
	for _, s := range specs {
		if s.key != keyOff {
			guarded++
		}
	}
	for _, s := range specs {
		rt := &route{pattern: s.pattern, key: s.key, dedups: s.dedups, scope: s.scope, proxies: map[*upstream]*httputil.ReverseProxy{}}
		if s.key != keyOff {
			cfg := s.cfg
			cfg.ObserveFunc, cfg.TraceFunc, cfg.StartFunc = obs.observe, obs.trace, g.startRequest(obs.start)
			cfg.ReplayCacheBytes, cfg.ReplayCacheableFunc = cacheBytes/int64(guarded), func(r store.Response) bool { return !isOutcomeUnknown(r) }
			if cfg.ReplayCacheBytes == 0 {
				cfg.ReplayCacheBytes = -1 // no cache, not idem's default
			}
			if rt.mw, err = idem.New(st, cfg); err != nil {
				return nil, cli.Usagef("route %q: %v", s.pattern.text, err)
			}
			rt.guarded = g.guard(rt)
		}
		for _, up := range ups {
			rt.proxies[up] = g.newProxy(up, transport(s.upstreamTimeout), s.dedups)
		}
		g.routes = append(g.routes, rt)
		g.readHeaders = appendNew(g.readHeaders, rt.scope.header)
		if rt.mw != nil {
			g.readHeaders = appendNew(g.readHeaders, http.CanonicalHeaderKey(rt.mw.Config().Header))
		}
	}
	g.readHeaders = appendNew(g.readHeaders, "Idempotency-Key") // the header forwarded upstream
	return g, nil
}

// observers are the hooks of metrics and traces: Prometheus's, and
// OpenTelemetry's with --otlp-endpoint.
type observers struct {
	observe func(idem.Event)
	trace   idem.TraceFunc
	start   func(context.Context) (context.Context, func(idem.Event))
	sweep   func(sweeper.Batch)
}

// logRequest logs one line per guarded request: never a body, a key or a
// credential. unknown: the request got the outcome-unknown answer, which
// the line says as outcome=unknown.
func (g *gateway) logRequest(e idem.Event, unknown bool) {
	level := slog.LevelInfo
	switch e.Outcome {
	case idem.OutcomeStoreUnavailable:
		level = slog.LevelError
	case idem.OutcomeLeaseLost, idem.OutcomeAbandoned:
		level = slog.LevelWarn
	}
	if !g.logger.Enabled(context.Background(), level) {
		return
	}
	outcome := string(e.Outcome)
	if unknown && e.Outcome == idem.OutcomeExecuted {
		outcome = "unknown"
	}
	attrs := []slog.Attr{slog.String("route", e.Route), slog.String("outcome", outcome),
		slog.Int("status", e.StatusCode), slog.String("key_hash", keyHash(e.Key)), slog.Duration("duration", e.Duration)}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	g.logger.LogAttrs(context.Background(), level, "request", attrs...)
}

// adminMux is the admin listener's: metrics and health, never the API's.
// More admin handlers mount on it.
func adminMux(reg *prometheus.Registry, ks *keyStore) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ks.ping(ctx); err != nil {
			http.Error(w, "key store unreachable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// appendNew appends s to list unless it holds it already.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
