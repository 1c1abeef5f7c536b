package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
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
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/idemprom"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/api"
	"github.com/idem-dev/idem/payments/bankhttp"
	"github.com/idem-dev/idem/payments/money"
	"github.com/idem-dev/idem/sweeper"
)

// defaultMaxHeaderBytes fits the API's headers with room: a bearer API
// key, an Idempotency-Key of up to 255 characters, W3C trace context with
// its 8 KiB of baggage (docs/paymentsd.md).
const defaultMaxHeaderBytes = 16 << 10

type serveFlags struct {
	addr            string
	db              *string
	ttl             time.Duration
	leaseDuration   time.Duration
	waitTimeout     time.Duration
	mode            string
	rates           string
	shutdownTimeout time.Duration
	log             cli.Log
	sweepInterval   time.Duration
	replayCacheMB   int64
	deferClaim      bool
	otlpEndpoint    string
	bankURL         string
	bankTimeout     time.Duration
	bankKeySecret   string
	completeEvery   time.Duration
	natsURL         string
	natsReplicas    int
	amqpURL         string
	queueWorkers    int
	grpcAddr        string
	bodyTimeout     time.Duration
	bodyMemoryMB    int64
	scopeRequests   int
	conns           conns.Limits // the HTTP listener's, and the gRPC one's header and idle bounds
	grpcMaxConns    int
	grpcMaxStreams  int
	grpcMaxMessage  int
	grpcReflection  bool
	metricsAddr     string
	metricsExplicit bool // --metrics-addr was given: an address that cannot be bound fails the start
	consoleToken    string
	idemMode        idem.Mode     // parsed from mode
	modeSet         bool          // --idempotency-mode (or --defer-claim) was given
	dbURL           dburl.DB      // db, else $DATABASE_URL, else the default
	bank            payments.Bank // from bankURL; nil: payouts refused
	bankSecret      []byte        // the secret provider keys are derived with
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "the address to listen on; port 0 picks a free port")
	f.db = dbFlag(fs)
	fs.DurationVar(&f.ttl, "idempotency-ttl", idem.DefaultTTL, "how long an Idempotency-Key binds its first response")
	fs.DurationVar(&f.leaseDuration, "lease-duration", idem.DefaultLeaseDuration, "the lease of a request in leased mode: after a crash, a retry may take the key over after this long")
	cli.Alias(fs, "lock-timeout", "lease-duration")
	fs.DurationVar(&f.waitTimeout, "wait-timeout", idem.DefaultWaitTimeout, "how long a duplicate waits for the request it repeats before it gets 409 in atomic mode")
	fs.StringVar(&f.mode, "idempotency-mode", "atomic-deferred", "how a request holds its key: atomic (one transaction; the handlers only touch the database), atomic-deferred\n(atomic, the key claimed at the completion: on PostgreSQL and MySQL one insert with the response and the COMMIT,\na round trip and two statements fewer; a concurrent duplicate's handler runs and is rolled back) or leased;\nSQLite cannot defer a claim: its default is atomic")
	fs.StringVar(&f.rates, "rates", "", "a JSON rates file replacing the built-in rate table (the format of GET /v1/rates)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long to wait for in-flight requests")
	f.log.Register(fs)
	fs.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:9464", "where to serve GET /metrics (Prometheus), never on --addr; \"\" turns it off")
	fs.StringVar(&f.consoleToken, "console-token-file", "", "a file holding the admin token (at least 16 bytes) of the operator console served at /console/ on\n--metrics-addr, never on --addr (docs/console.md); default none: no console")
	fs.DurationVar(&f.sweepInterval, "sweep-interval", sweeper.DefaultInterval, "how often to delete the idempotency records past their retention; 0 turns the sweeper off\n(with several replicas, one sweeps at a time)")
	fs.Int64Var(&f.replayCacheMB, "replay-cache-mb", 64, "megabytes of completed idempotency records kept in memory, so that a retry this process has answered\nbefore costs no database round trip; 0 turns the cache off")
	fs.BoolVar(&f.deferClaim, "defer-claim", true, cli.Deprecated+"idempotency-mode atomic-deferred (true) or atomic (false)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "an OpenTelemetry collector's OTLP/HTTP base URL, such as http://127.0.0.1:4318: the idempotency\nlayer's spans and metrics are exported there (default none: Prometheus metrics at /metrics only)")
	fs.StringVar(&f.bankURL, "bank-url", "", "the bank payouts go through (bankd's API, docs/bankd.md); without it POST /v1/payouts answers 503")
	fs.DurationVar(&f.bankTimeout, "bank-timeout", bankhttp.DefaultTimeout, "how long one call to the bank may take; past it the payout's outcome is unknown (202 pending)")
	fs.StringVar(&f.bankKeySecret, "bank-key-secret-file", "", "a file holding the secret (at least 16 bytes) the keys sent to the bank are derived with;\nrequired with --bank-url, the same on every replica (default $PAYMENTSD_BANK_KEY_SECRET)")
	fs.DurationVar(&f.completeEvery, "complete-interval", completer.DefaultInterval, "with --bank-url, how often the completer looks for payouts their requests abandoned")
	fs.StringVar(&f.natsURL, "nats-url", "", "also consume payment commands from NATS JetStream at this URL (nats://host:4222): stream PAYMENTS,\ndurable consumer paymentsd (docs/queues.md)")
	fs.IntVar(&f.natsReplicas, "nats-replicas", 1, "with --nats-url, the replicas of the streams paymentsd makes (PAYMENTS, PAYMENTS_DEADLETTER):\n3 on a JetStream cluster of 3 or more servers, so that a server lost loses no command (docs/queues.md)")
	fs.StringVar(&f.amqpURL, "amqp-url", "", "also consume payment commands from RabbitMQ at this URL (amqp://user:password@host:5672/) (docs/queues.md)")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "", "also serve payments.v1.Payments over gRPC on this address, e.g. 127.0.0.1:9090 (docs/grpc.md)")
	fs.IntVar(&f.queueWorkers, "queue-workers", 8, "commands processed at once per broker")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", api.DefaultBodyTimeout, "how long a request body may take to arrive; a slower one gets 408 and nothing is stored")
	fs.Int64Var(&f.bodyMemoryMB, "body-memory-mb", api.DefaultBodyMemory>>20, "megabytes of request bodies in flight at once (each counted at its Content-Length); past it,\n503 with Retry-After and nothing is stored")
	fs.IntVar(&f.scopeRequests, "requests-per-scope", api.DefaultRequestsPerUser, "how many requests that move money one scope (a user) may have in flight; past it, 429 with Retry-After")
	cli.Alias(fs, "requests-per-user", "requests-per-scope")
	f.conns = conns.Limits{HeaderTimeout: conns.DefaultHeaderTimeout, MaxHeaderBytes: defaultMaxHeaderBytes, MaxConns: conns.DefaultMaxConns,
		MaxIdleConns: conns.DefaultMaxIdleConns, IdleTimeout: conns.DefaultIdleTimeout}
	f.conns.Register(fs)
	fs.IntVar(&f.grpcMaxConns, "grpc-max-conns", defaultGRPCMaxConns, "with --grpc-addr, connections open at once on it; past it, new connections wait to be accepted")
	fs.IntVar(&f.grpcMaxStreams, "grpc-max-streams", defaultGRPCMaxStreams, "with --grpc-addr, calls in flight at once on one connection; past it the call is refused (REFUSED_STREAM)")
	fs.BoolVar(&f.grpcReflection, "grpc-reflection", false, "with --grpc-addr, also serve gRPC server reflection (grpcurl list, describe); its calls need an API key")
	fs.IntVar(&f.grpcMaxMessage, "grpc-max-message-bytes", defaultGRPCMaxMessage, "with --grpc-addr, the largest request message; larger: ResourceExhausted, unread")
	err := cli.ParseFlags(fs, args, stdout, "paymentsd", "paymentsd [serve] [flags]\n\nRuns the HTTP API. Other commands: migrate, users, keys (see 'paymentsd --help').")
	if err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { f.metricsExplicit = f.metricsExplicit || fl.Name == "metrics-addr" })
	cli.WarnDeprecated(fs, stderr, "paymentsd")
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idempotency-ttl", f.ttl}, {"lease-duration", f.leaseDuration}, {"wait-timeout", f.waitTimeout}, {"shutdown-timeout", f.shutdownTimeout},
		{"bank-timeout", f.bankTimeout}, {"complete-interval", f.completeEvery}, {"body-timeout", f.bodyTimeout}} {
		if d.v <= 0 {
			return cli.Usagef("serve: --%s must be positive, got %v", d.name, d.v)
		}
	}
	if f.natsReplicas < 1 || f.natsReplicas > 5 {
		return cli.Usagef("serve: --nats-replicas must be 1 to 5 (JetStream's limit), got %d", f.natsReplicas)
	}
	if f.queueWorkers <= 0 {
		return cli.Usagef("serve: --queue-workers must be positive, got %d", f.queueWorkers)
	}
	if f.replayCacheMB < 0 {
		return cli.Usagef("serve: --replay-cache-mb must be positive, or 0 for no cache, got %d", f.replayCacheMB)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"body-memory-mb", f.bodyMemoryMB}, {"requests-per-scope", int64(f.scopeRequests)}, {"grpc-max-conns", int64(f.grpcMaxConns)},
		{"grpc-max-streams", int64(f.grpcMaxStreams)}, {"grpc-max-message-bytes", int64(f.grpcMaxMessage)}} {
		if n.v <= 0 {
			return cli.Usagef("serve: --%s must be positive, got %d", n.name, n.v)
		}
	}
	if err := f.conns.Check(); err != nil {
		return cli.Usagef("serve: %v", err)
	}
	if f.sweepInterval < 0 {
		return cli.Usagef("serve: --sweep-interval must be positive, or 0 for no sweeper, got %v", f.sweepInterval)
	}
	if f.consoleToken != "" && f.metricsAddr == "" {
		return cli.Usagef("serve: --console-token-file needs --metrics-addr: the console is served on the admin listener only")
	}
	if f.idemMode, err = idem.ParseMode(f.mode); err != nil {
		return cli.Usagef("serve: --idempotency-mode %q: want atomic, atomic-deferred or leased", f.mode)
	}
	f.modeSet = cli.IsSet(fs, "idempotency-mode") || cli.IsSet(fs, "defer-claim")
	if cli.IsSet(fs, "defer-claim") && f.idemMode != idem.ModeLeased {
		f.idemMode = idem.ModeAtomic
		if f.deferClaim {
			f.idemMode = idem.ModeAtomicDeferred
		}
	}
	if f.dbURL, err = resolveDB(*f.db, getenv); err != nil {
		return err
	}
	if f.bankURL != "" {
		if f.bank, f.bankSecret, err = openBank(f, getenv); err != nil {
			return err
		}
	}
	logger, err := f.log.Logger(stderr, "serve")
	if err != nil {
		return err
	}
	warnReadable(logger, "--bank-key-secret-file", f.bankKeySecret)
	// From here on every line is the logger's, the last one too.
	if err := serveOn(ctx, f, logger, stdout); err != nil {
		logger.Error("paymentsd stopped", "err", err)
		return cli.Logged(err)
	}
	return nil
}

// serveOn reads the rates, binds the listeners, opens and migrates the
// database, and serves until ctx ends. The listeners come before the
// database: a port already in use fails before the database is touched.
func serveOn(ctx context.Context, f serveFlags, logger *slog.Logger, stdout io.Writer) error {
	rates := money.DefaultTable()
	if f.rates != "" {
		var err error
		if rates, err = readRates(f.rates); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	defer ln.Close() // Serve closes it too; this covers the returns before Serve
	var mln net.Listener
	if f.metricsAddr != "" {
		mln, err = net.Listen("tcp", f.metricsAddr)
		switch {
		case err == nil:
			defer mln.Close()
		case f.metricsExplicit:
			return fmt.Errorf("listen on %s (--metrics-addr): %w", f.metricsAddr, err)
		default:
			// The default port taken (another paymentsd, another exporter)
			// must not stop a quickstart: metrics are not the service.
			logger.Warn("serving no metrics: the default --metrics-addr cannot be bound; give --metrics-addr to choose another",
				"addr", f.metricsAddr, "err", err)
			mln = nil
		}
	}

	b, err := openBackend(ctx, f.dbURL)
	if err != nil {
		return err
	}
	defer b.close()
	if !f.modeSet && f.idemMode == idem.ModeAtomicDeferred && !b.store.Capabilities().DeferredClaim {
		f.idemMode = idem.ModeAtomic // the default on a store that cannot defer a claim
	}
	// The doors other than HTTP (queue consumers, gRPC) finish the work in
	// hand before the database closes.
	var stopConsumers []func()
	defer func() {
		for _, wait := range stopConsumers {
			wait()
		}
	}()
	what, err := b.migrate(ctx, 0)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", b.display, err)
	}
	logger.Info("database ready", "store", b.kind, "db", b.display, "migrations", what)
	if b.durability != nil {
		d, err := b.durability(ctx)
		switch {
		case err != nil:
			logger.Warn("durability not checked", "err", err)
		case d.Warning() != "":
			logger.Warn(d.Warning(), "db", b.display)
		}
	}

	svc, err := payments.New(b.ledger, payments.Config{Rates: rates})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if b.trips != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "paymentsd_postgres_round_trips_total",
			Help: "Round trips to PostgreSQL: each statement sent alone, and each pipelined batch, is one.",
		}, func() float64 { return float64(b.trips.Count()) }))
	}
	m := idemprom.New(reg)
	// The console's closures read mw and comp, set below, before the admin
	// listener serves it.
	var (
		mw   *idem.Middleware
		comp *completer.Completer
	)
	con, err := newConsole(f, b, svc, func() *idem.Middleware { return mw }, func() *completer.Completer { return comp }, logger)
	if err != nil {
		return err
	}
	cfg := idem.Config{
		Mode: f.idemMode, TTL: f.ttl, LeaseDuration: f.leaseDuration, WaitTimeout: f.waitTimeout,
		ReplayCacheBytes: replayCache(f.replayCacheMB),
		ObserveFunc:      idem.ObserveAll(idem.LogEvents(logger), m.Observe),
		TraceFunc:        m.Trace, ProviderKeySecret: f.bankSecret,
	}
	observeSweep := m.ObserveSweep
	if con != nil {
		cfg.ObserveFunc = idem.ObserveAll(cfg.ObserveFunc, con.Observe)
		observeSweep = func(b sweeper.Batch) { m.ObserveSweep(b); con.ObserveSweep(b) }
	}
	if f.otlpEndpoint != "" {
		tel, stop, err := otlp.Start(ctx, f.otlpEndpoint, "paymentsd")
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
		cfg.StartFunc = tel.Start
		cfg.ObserveFunc = idem.ObserveAll(cfg.ObserveFunc, tel.Observe)
		cfg.TraceFunc = idem.TraceAll(cfg.TraceFunc, tel.Trace)
		sweepBefore := observeSweep
		observeSweep = func(b sweeper.Batch) { sweepBefore(b); tel.ObserveSweep(b) }
		logger.Info("exporting spans and metrics over OTLP", "endpoint", f.otlpEndpoint)
	}
	mw, err = idem.New(b.store, cfg)
	if err != nil {
		return cli.Usagef("serve: %v", err)
	}
	// One Bounds for HTTP and gRPC: a user's requests count at both doors together.
	bounds, err := api.NewBounds(api.Limits{BodyTimeout: f.bodyTimeout, BodyMemory: f.bodyMemoryMB << 20, RequestsPerUser: f.scopeRequests})
	if err != nil {
		return err
	}
	apiCfg := api.Config{Service: svc, Idempotency: mw, Logger: logger, Bank: f.bank, Bounds: bounds}
	apiHandler, err := api.New(apiCfg)
	if err != nil {
		return err
	}
	doors := api.Config{Service: svc, Idempotency: mw, Logger: logger, Bank: f.bank, Bounds: bounds}
	if err := startConsumers(ctx, f, mw, doors, logger, &stopConsumers); err != nil {
		return err
	}
	if f.grpcAddr != "" {
		wait, err := serveGRPC(ctx, f, mw, doors, logger)
		if err != nil {
			return err
		}
		stopConsumers = append(stopConsumers, wait)
	}

	// The sweeper runs until shutdown begins; the database closes after it.
	sweepDone := make(chan struct{})
	sctx, stopSweep := context.WithCancel(ctx)
	defer func() { stopSweep(); <-sweepDone }()
	if f.sweepInterval == 0 {
		close(sweepDone)
	} else {
		sw, err := newSweeper(b, sweeper.Config{Interval: f.sweepInterval, ObserveFunc: observeSweep, Logger: logger})
		if err != nil {
			return err
		}
		go func() {
			defer close(sweepDone)
			_ = sw.Run(sctx) // it logs its own failures and ends with ctx
		}()
	}

	// The completer finishes the payouts their requests abandoned, until
	// shutdown begins; every replica runs one, and the key's lease lets one
	// attempt at a time hold a payout.
	completeDone := make(chan struct{})
	cctx, stopCompleter := context.WithCancel(ctx)
	defer func() { stopCompleter(); <-completeDone }()
	if f.bank == nil {
		close(completeDone)
	} else {
		if !b.store.Capabilities().Unfinished {
			return fmt.Errorf("the %s store cannot list unfinished payouts", b.kind)
		}
		resume, err := api.PayoutResume(apiCfg)
		if err != nil {
			return err
		}
		leased, err := mw.WithMode(idem.ModeLeased)
		if err != nil {
			return err
		}
		c, err := completer.New(leased, b.store, grpcPayoutResume(resume), completer.Config{Interval: f.completeEvery, Logger: logger})
		if err != nil {
			return err
		}
		comp = c
		go func() {
			defer close(completeDone)
			_ = c.Run(cctx) // it logs its own failures and ends with ctx
		}()
	}

	base := "http://" + ln.Addr().String()
	// The demo user is made once the address is known, so its curl line
	// names the real address.
	has, err := svc.HasUsers(ctx)
	if err != nil {
		return err
	}
	var demoKey string
	if !has && b.kind == "sqlite" {
		if _, demoKey, err = svc.CreateUser(ctx); err != nil {
			return err
		}
	}
	attrs := []any{"url", base, "store", b.kind, "mode", f.idemMode.String(), "metrics", "off"}
	if mln != nil {
		attrs[len(attrs)-1] = "http://" + mln.Addr().String() + "/metrics"
	}
	if !has && demoKey == "" {
		// Before "listening", so whoever waits for that line has this one too.
		logger.Warn("the database has no users: create one with 'paymentsd users create" + dbArg(b.display) + "'")
	}
	logger.Info("listening", attrs...)
	if demoKey != "" {
		printDemo(stdout, base, demoKey, b.display)
	}

	errc := make(chan error, 2)
	srv := f.conns.Server(accessLog(logger, apiHandler), slog.NewLogLogger(logger.Handler(), slog.LevelWarn))
	srv.ReadTimeout = time.Minute
	go func() { errc <- srv.Serve(f.conns.Listener(ln)) }()
	if mln != nil {
		// /metrics holds counts and latencies, never a key, a user or a
		// body; still, it is served only here, never on the API's listener.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if con != nil {
			mux.Handle("/console/", http.StripPrefix("/console", con))
			go func() { _ = con.Run(sctx) }() // ends with the sweeper's context, before the database closes
			logger.Info("operator console", "url", "http://"+mln.Addr().String()+"/console/")
		}
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: f.conns.HeaderTimeout, MaxHeaderBytes: f.conns.MaxHeaderBytes, ErrorLog: srv.ErrorLog}
		go func() { errc <- msrv.Serve(mln) }()
		defer msrv.Close()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// Drain: stop accepting, let every in-flight request finish (and its
	// key complete), then close the database.
	return cli.Drain(srv, f.shutdownTimeout, logger)
}

// openBank returns the bank's client and the secret its keys are derived
// with: --bank-key-secret-file, else $PAYMENTSD_BANK_KEY_SECRET.
func openBank(f serveFlags, getenv func(string) string) (payments.Bank, []byte, error) {
	bank, err := bankhttp.New(bankhttp.Config{URL: f.bankURL, Timeout: f.bankTimeout})
	if err != nil {
		return nil, nil, cli.Usagef("serve: --bank-url: %v", err)
	}
	secret := []byte(getenv("PAYMENTSD_BANK_KEY_SECRET"))
	if f.bankKeySecret != "" {
		if secret, err = os.ReadFile(f.bankKeySecret); err != nil {
			return nil, nil, fmt.Errorf("bank key secret: %w", err)
		}
	}
	secret = []byte(strings.TrimSpace(string(secret)))
	if len(secret) < idem.MinProviderKeySecret {
		return nil, nil, cli.Usagef("serve: --bank-url needs a secret of at least %d bytes to derive the bank's keys with (--bank-key-secret-file or $PAYMENTSD_BANK_KEY_SECRET)", idem.MinProviderKeySecret)
	}
	return bank, secret, nil
}

// warnReadable warns when the file a flag names holds a secret that its
// group or others may read.
func warnReadable(logger *slog.Logger, flag, path string) {
	if path == "" {
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		logger.Warn("a file holding a secret is readable by others than its owner; chmod 600 it", "flag", flag, "path", path, "mode", fi.Mode().Perm().String())
	}
}

func readRates(path string) (*money.Table, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rates: %w", err)
	}
	defer fh.Close()
	t, err := money.ReadTable(fh)
	if err != nil {
		// One line, without package money's prefix on each of its reasons.
		return nil, fmt.Errorf("rates %s: %s", path, strings.ReplaceAll(strings.ReplaceAll(err.Error(), "money: ", ""), "\n", "; "))
	}
	return t, nil
}

// printDemo prints lines that work when pasted into a shell: the comment
// lines are shell comments.
func printDemo(w io.Writer, base, apiKey, path string) {
	more := "paymentsd users create" + dbArg(path)
	fmt.Fprintf(w, `# paymentsd made a demo user. Its API key is shown only this once (more users: %s).
# Paste these two lines into a shell to make a deposit; paste the curl line again to see it replayed.
export API_KEY=%s
curl -sS -i -X POST %s/v1/deposits -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-deposit-1' -d '{"currency":"USD","amount":10000}'
`, more, apiKey, base)
}

// dbArg is the --db argument that names db on a command line, "" for the
// default database.
func dbArg(db string) string {
	if db == defaultDB {
		return ""
	}
	return " --db " + shellQuote(db)
}

// accessLog logs one line per request: never a body, never a header that
// could hold a secret.
func accessLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.statusCode()), slog.Duration("duration", time.Since(start)),
			slog.Bool("replayed", w.Header().Get("Idempotent-Replayed") == "true"))
	})
}

// statusRecorder remembers the status a handler sent.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) statusCode() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// replayCache is the replay cache's size: mb megabytes, none for 0. On
// SQLite, whose claim takes the database's write lock, the middleware
// still reads a key the cache misses before claiming it
// (store.Capabilities.ClaimLocksStore).
func replayCache(mb int64) int64 {
	if mb == 0 {
		return -1 // no cache
	}
	return mb << 20
}
