package bench

import (
	"github.com/idem-dev/idem/cmd/internal/freeport"

	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// runner holds what every segment of a run shares.
type runner struct {
	cfg     Config
	work    string // temp dir: binaries, server logs
	pgss    bool
	wl      *workload
	cpu     *cpuMeter
	servers []*server
	// trivial and baseTrivial are the trivial server's binaries: this
	// build's, and the baseline tree's ("" without one); baseGateway is
	// the baseline tree's idem-gateway.
	trivial, baseTrivial, baseGateway string
}

// Run runs the benchmark and writes its report into cfg.Out. A sweep run
// whose checks fail returns its report, written, with the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(cfg.ClientProcs)
	if cfg.Out == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		cfg.Out = filepath.Join(root, "results", "bench")
		switch {
		case cfg.Sweep:
			cfg.Out += "-sweep"
		case cfg.CitusURL != "":
			cfg.Out = filepath.Join(cfg.Out, "citus")
		}
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "idem-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var id [4]byte
	_, _ = rand.Read(id[:])
	r := &runner{cfg: cfg, work: work, wl: &workload{run: hex.EncodeToString(id[:])}}
	defer r.stopServers()
	if cfg.Paymentsd == "" && !cfg.GatewayOnly {
		cfg.Logf("building paymentsd")
		if r.cfg.Paymentsd, err = buildPaymentsd(ctx, work, ""); err != nil {
			return nil, err
		}
	}
	if cfg.Gateway == "" && !cfg.Growth && !cfg.Sweep && cfg.CitusURL == "" {
		cfg.Logf("building idem-gateway")
		if r.cfg.Gateway, err = r.buildGateway(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.buildBaseline(ctx); err != nil {
		return nil, err
	}
	if len(cfg.Self) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		r.cfg.Self = []string{exe, "serve"}
	}
	if cfg.Growth {
		return r.growth(ctx)
	}
	if cfg.Sweep {
		return r.sweep(ctx)
	}
	if cfg.Memory {
		return r.memory(ctx)
	}
	if cfg.GatewayOnly {
		return r.gateway(ctx)
	}
	if cfg.CitusURL != "" {
		return r.citus(ctx)
	}
	return r.main(ctx)
}

// buildBaseline builds paymentsd and the trivial server from the baseline
// tree, when Config.Baseline names one (a directory, not a binary).
func (r *runner) buildBaseline(ctx context.Context) error {
	if r.cfg.Baseline == "" {
		return nil
	}
	st, err := os.Stat(r.cfg.Baseline)
	if err != nil {
		return fmt.Errorf("bench: baseline: %w", err)
	}
	if !st.IsDir() {
		return nil
	}
	tree := r.cfg.Baseline
	r.cfg.Logf("building the baseline from %s", tree)
	if r.cfg.Baseline, err = buildPaymentsd(ctx, r.work, tree); err != nil {
		return err
	}
	if r.baseTrivial, err = buildTrivial(ctx, r.work, tree); err != nil {
		return err
	}
	if r.cfg.Growth || r.cfg.Sweep {
		return nil
	}
	r.baseGateway = filepath.Join(r.work, "idem-gateway-baseline")
	return goBuild(ctx, tree, r.baseGateway, "./cmd/idem-gateway")
}

// open makes a run's database, on a schema named after prefix, and
// describes the machine with what the database says of itself. The
// caller disposes of db.
func (r *runner) open(ctx context.Context, prefix string) (*database, Machine, error) {
	machine := describeMachine()
	db, err := newDatabase(ctx, r.cfg.DatabaseURL, prefix, "", r.cfg.Users, 4)
	if err != nil {
		return nil, machine, err
	}
	if err := machine.fromDatabase(ctx, db.pool); err != nil {
		r.dispose(ctx, db)
		return nil, machine, err
	}
	return db, machine, nil
}

// dispose drops db's schema at the end of a run, or keeps it (Keep).
func (r *runner) dispose(ctx context.Context, db *database) {
	if r.cfg.Keep {
		r.cfg.Logf("kept schema %s", db.schema)
		db.pool.Close()
		return
	}
	_ = db.drop(context.WithoutCancel(ctx))
}

func (r *runner) stopServers() {
	for _, s := range r.servers {
		s.stop()
	}
}

// startIdem starts a server of the idempotent variants in mode: paymentsd,
// or (SelfServer) the same wiring in this package's Serve.
func (r *runner) startIdem(ctx context.Context, name, mode string, db *database) (*server, error) {
	if r.cfg.SelfServer {
		return r.startSelf(ctx, name, mode, db)
	}
	return r.startPaymentsd(ctx, name, mode, db)
}

// paymentsdModes are the idem.Mode names paymentsd is measured in: its
// default, atomic with the claim deferred to the completion, and leased.
var paymentsdModes = []string{"atomic-deferred", "leased"}

// startPaymentsd starts the paymentsd binary in mode on db, with extra
// serve flags. Its /metrics tells its round trips to PostgreSQL.
func (r *runner) startPaymentsd(ctx context.Context, name, mode string, db *database, extra ...string) (*server, error) {
	return r.startPaymentsdBin(ctx, r.cfg.Paymentsd, name, mode, db, extra...)
}

// startPaymentsdBin is startPaymentsd for the paymentsd binary bin.
func (r *runner) startPaymentsdBin(ctx context.Context, bin, name, mode string, db *database, extra ...string) (*server, error) {
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s, err := startServer(ctx, name, r.work, r.cfg.ServerProcs, nil, func(addr string) []string {
		// Logging at warn: one line per request would cost paymentsd CPU
		// that the bare server does not spend.
		return append([]string{bin, "serve", "--addr", addr, "--metrics-addr", metrics, "--db", db.url,
			"--idempotency-mode", mode, "--log-level", "warn"}, extra...)
	})
	if err != nil {
		return nil, err
	}
	s.trips = countAt("http://"+metrics+"/metrics", tripsMetric)
	r.servers = append(r.servers, s)
	return s, nil
}

// startGateway starts idem-gateway in front of up, its keys in db, with
// extra serve flags. Its /metrics tells its round trips to PostgreSQL;
// with PprofDir, it serves net/http/pprof (buildGateway).
func (r *runner) startGateway(ctx context.Context, up *server, db *database, extra ...string) (*server, error) {
	return r.startGatewayBin(ctx, r.cfg.Gateway, up, db, extra...)
}

// startGatewayBin is startGateway for the idem-gateway binary bin.
func (r *runner) startGatewayBin(ctx context.Context, bin string, up *server, db *database, extra ...string) (*server, error) {
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var env []string
	pprofAddr := ""
	if r.cfg.PprofDir != "" && bin == r.cfg.Gateway { // a baseline has no pprof
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		env = append(env, "IDEM_BENCH_PPROF="+pprofAddr)
	}
	s, err := startServer(ctx, filepath.Base(bin), r.work, r.cfg.ServerProcs, env, func(addr string) []string {
		return append([]string{bin, "--listen", addr, "--upstream", up.base, "--db", db.url, "--metrics-addr", metrics}, extra...)
	})
	if err != nil {
		return nil, err
	}
	s.trips = countAt("http://"+metrics+"/metrics", gatewayTripsMetric)
	s.pprof = pprofAddr
	r.servers = append(r.servers, s)
	return s, nil
}

func (r *runner) startSelf(ctx context.Context, name, wiring string, db *database) (*server, error) {
	pprofAddr := ""
	if r.cfg.PprofDir != "" {
		port, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	s, err := startServer(ctx, name, r.work, r.cfg.ServerProcs, r.cfg.SelfEnv, func(addr string) []string {
		args := append(slices.Clone(r.cfg.Self), "-db", db.url, "-addr", addr, "-wiring", wiring)
		if pprofAddr != "" {
			args = append(args, "-pprof", pprofAddr)
		}
		return args
	})
	if err != nil {
		return nil, err
	}
	s.pprof = pprofAddr
	r.servers = append(r.servers, s)
	return s, nil
}

// main is the default run: fresh, replay and storm in both modes, bare and
// ceiling; the trivial handler; idem-gateway, fresh and replay, in front
// of its upstreams (gateway.go); and deposits over HTTP, gRPC and the
// queue, and payouts through bankd (doors.go).
func (r *runner) main(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	db, machine, err := r.open(ctx, "bench")
	if err != nil {
		return nil, err
	}
	defer r.dispose(ctx, db)
	r.pgss = enablePgss(ctx, db.pool)
	r.cpu = newCPUMeter(ctx, db.pool)
	srv := map[string]*server{}
	for _, mode := range paymentsdModes {
		if srv[mode], err = r.startIdem(ctx, "paymentsd-"+mode, mode, db); err != nil {
			return nil, err
		}
	}
	// The same paymentsd without its replay cache, so the table shows both.
	for _, mode := range paymentsdModes {
		if srv[mode+"-nocache"], err = r.startPaymentsd(ctx, "paymentsd-"+mode+"-nocache", mode, db, "--replay-cache-mb", "0"); err != nil {
			return nil, err
		}
	}
	if srv["bare"], err = r.startSelf(ctx, "bare", "bare", db); err != nil {
		return nil, err
	}
	r.cfg.Logf("building the trivial server")
	if r.trivial, err = buildTrivial(ctx, r.work, ""); err != nil {
		return nil, err
	}
	trivial, err := r.startTrivial(ctx, "trivial", r.trivial, db, trivialWirings(true))
	if err != nil {
		return nil, err
	}
	cfg.Logf("seeding %d completed keys", cfg.ReplayKeys)
	seeds, err := seed(ctx, &variant{srv: srv["atomic-deferred"], db: db}, r.wl, cfg.ReplayKeys, cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	pick := func(rnd *mrand.Rand) request { return seeds[rnd.IntN(len(seeds))] }
	var vs []*variant
	for _, mode := range paymentsdModes {
		vs = append(vs,
			&variant{name: "fresh-" + mode, kind: kindFresh, mode: mode, srv: srv[mode], db: db},
			&variant{name: "replay-" + mode, kind: kindReplay, mode: mode, srv: srv[mode], db: db, replay: pick},
			&variant{name: "storm-" + mode, kind: kindStorm, mode: mode, srv: srv[mode], db: db},
			&variant{name: "fresh-" + mode + " (no cache)", kind: kindFresh, mode: mode, srv: srv[mode+"-nocache"], db: db},
			&variant{name: "replay-" + mode + " (no cache)", kind: kindReplay, mode: mode, srv: srv[mode+"-nocache"], db: db, replay: pick})
	}
	ceiling, err := newCeilingPool(ctx, db, cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	defer ceiling.Close()
	vs = append(vs, &variant{name: "bare", kind: kindBare, srv: srv["bare"], db: db},
		&variant{name: "ceiling", kind: kindCeiling, db: db, pool: ceiling})
	tvs, err := r.trivialVariants(ctx, trivial, db, "")
	if err != nil {
		return nil, err
	}
	vs = append(vs, tvs...)
	// idem-gateway in front of an upstream in Go (the trivial server's
	// bare wiring) and one in Node, and each called directly.
	if r.selects("gateway-", "upstream ") {
		gvs, err := r.gatewayVariants(ctx, db, trivial["bare"])
		if err != nil {
			return nil, err
		}
		vs = append(vs, gvs...)
	}
	if r.selects("deposit-", "grpc deposit-", "queue deposit-", "payout-") {
		dvs, err := r.doorVariants(ctx, db)
		if err != nil {
			return nil, err
		}
		vs = append(vs, dvs...)
	}
	if cfg.Baseline != "" {
		// The baseline's tables are its own, on a schema of their own: an
		// earlier build may name their columns differently.
		bdb, err := newDatabase(ctx, cfg.DatabaseURL, "bench_base", cfg.Baseline, cfg.Users, 4)
		if err != nil {
			return nil, err
		}
		defer r.dispose(ctx, bdb)
		bvs, err := r.baselineVariants(ctx, bdb)
		if err != nil {
			return nil, err
		}
		vs = append(vs, bvs...)
	}
	if vs, err = r.only(pairBaselines(vs)); err != nil {
		return nil, err
	}
	return r.measure(ctx, machine, vs, nil)
}

// measure runs the rounds of vs, and writes their report into
// Config.Out, with the machine's load before and after; set, when not
// nil, completes the report before it is written.
func (r *runner) measure(ctx context.Context, machine Machine, vs []*variant, set func(*Report)) (*Report, error) {
	machine.LoadBefore = loadAvg()
	samples, err := r.rounds(ctx, vs)
	if err != nil {
		return nil, err
	}
	machine.LoadAfter = loadAvg()
	rep := newReport(r.cfg, machine, vs, samples)
	if set != nil {
		set(rep)
	}
	return rep, rep.write(r.cfg.Out, "")
}

// pairBaselines moves each baseline variant ("X (baseline)") right behind
// X, so that the two run back to back in every round: on a shared machine
// whose load drifts over a round, variants far apart in it are measured on
// different machines.
func pairBaselines(vs []*variant) []*variant {
	var out, base []*variant
	for _, v := range vs {
		if strings.HasSuffix(v.name, " (baseline)") {
			base = append(base, v)
		} else {
			out = append(out, v)
		}
	}
	for _, b := range base {
		i := slices.IndexFunc(out, func(v *variant) bool { return v.name+" (baseline)" == b.name })
		out = slices.Insert(out, i+1, b) // i = -1 (no counterpart): first
	}
	return out
}

// baselineVariants starts the baseline's paymentsd in each mode and its
// trivial server on db, seeds their replay keys, and returns their fresh
// and replay variants.
func (r *runner) baselineVariants(ctx context.Context, db *database) ([]*variant, error) {
	var vs []*variant
	for _, mode := range paymentsdModes {
		metrics, err := freeAddr()
		if err != nil {
			return nil, err
		}
		s, err := startServer(ctx, "baseline-"+mode, r.work, r.cfg.ServerProcs, nil, func(addr string) []string {
			flagMode, extra := mode, []string(nil)
			if mode == "atomic-deferred" {
				// Every build since the deferred claim knows atomic with
				// --defer-claim; an older one may not know atomic-deferred.
				flagMode, extra = "atomic", []string{"--defer-claim=true"}
			}
			return append([]string{r.cfg.Baseline, "serve", "--addr", addr, "--metrics-addr", metrics, "--db", db.url,
				"--idempotency-mode", flagMode, "--log-level", "warn"}, extra...)
		})
		if err != nil {
			return nil, err
		}
		s.trips = countAt("http://"+metrics+"/metrics", tripsMetric)
		r.servers = append(r.servers, s)
		seeds, err := seed(ctx, &variant{srv: s, db: db}, r.wl, r.cfg.ReplayKeys, r.cfg.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", mode, err)
		}
		vs = append(vs,
			&variant{name: "fresh-" + mode + " (baseline)", kind: kindFresh, mode: mode, srv: s, db: db},
			&variant{name: "replay-" + mode + " (baseline)", kind: kindReplay, mode: mode, srv: s, db: db,
				replay: func(rnd *mrand.Rand) request { return seeds[rnd.IntN(len(seeds))] }})
	}
	if r.baseTrivial == "" {
		return vs, nil
	}
	base, err := r.startBaselineTrivial(ctx, db)
	if err != nil {
		return nil, err
	}
	tvs, err := r.trivialVariants(ctx, base, db, " (baseline)")
	return append(vs, tvs...), err
}

// selects reports whether the run has a variant whose name begins with
// one of prefixes: every run without Config.Variants. The servers only
// those variants use are not started otherwise (a baseline's gateway may
// not know this build's flags).
func (r *runner) selects(prefixes ...string) bool {
	return len(r.cfg.Variants) == 0 || slices.ContainsFunc(r.cfg.Variants, func(name string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	})
}

// only keeps the variants Config.Variants names.
func (r *runner) only(vs []*variant) ([]*variant, error) {
	if len(r.cfg.Variants) == 0 {
		return vs, nil
	}
	var out []*variant
	for _, name := range r.cfg.Variants {
		i := slices.IndexFunc(vs, func(v *variant) bool { return v.name == name })
		if i < 0 {
			return nil, fmt.Errorf("bench: no variant %q", name)
		}
		out = append(out, vs[i])
	}
	return out, nil
}

// rounds runs every variant once per round, the order rotated by one each
// round.
func (r *runner) rounds(ctx context.Context, vs []*variant) ([]*sample, error) {
	var out []*sample
	for round := range r.cfg.Rounds {
		for i := range vs {
			v := vs[(i+round)%len(vs)]
			s, err := r.segment(ctx, v, round+1, round == r.cfg.Rounds-1)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", v.name, round+1, err)
			}
			r.cfg.Logf("round %d  %-22s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  %v", round+1, v.name, s.RPS,
				ms(s.P50), ms(s.P99), s.Outcomes)
			out = append(out, s)
		}
	}
	return out, nil
}

func (r *runner) segment(ctx context.Context, v *variant, round int, last bool) (*sample, error) {
	pool := v.db.pool
	if r.pgss {
		if err := resetPgss(ctx, pool); err != nil {
			return nil, err
		}
	}
	before, err := readCounters(ctx, pool, false)
	if err != nil {
		return nil, err
	}
	meter, workersBefore := r.cpu, []workerCounts(nil)
	if v.citus != nil {
		meter = v.citus.coordinator
		if workersBefore, err = v.citus.counts(ctx, r.pgss, true); err != nil {
			return nil, err
		}
	}
	if before.RoundTrips, before.PeerTrips, err = roundTrips(ctx, v); err != nil {
		return nil, err
	}
	serverPID, peerPID := 0, 0
	if v.srv != nil {
		serverPID = v.srv.cmd.Process.Pid
	}
	if v.peer != nil {
		peerPID = v.peer.cmd.Process.Pid
	}
	w := newWindow(r.cfg.Warmup, r.cfg.Duration)
	cpuFrom, workerCPUFrom := make(chan cpuTimes, 1), make(chan []float64, 1)
	go func() {
		time.Sleep(time.Until(w.from))
		cpuFrom <- meter.read(serverPID, peerPID)
		if v.citus != nil {
			workerCPUFrom <- v.citus.cpu()
		}
	}()
	var profiled chan error
	if v.srv != nil && v.srv.pprof != "" && last {
		profiled = make(chan error, 1)
		go func() { profiled <- v.srv.cpuProfile(ctx, w, filepath.Join(r.cfg.PprofDir, v.name+".cpu.pprof")) }()
	}
	var t *tally
	switch v.kind {
	case kindFresh, kindReplay, kindBare:
		t, err = runRequests(ctx, v, r.wl, r.cfg.Concurrency, w)
	case kindStorm:
		t, err = runStorm(ctx, v, r.wl, r.cfg.Concurrency, r.cfg.StormClients, w)
	case kindCeiling:
		t, err = runCeiling(ctx, v, r.wl, r.cfg.Concurrency, w)
	}
	if err != nil {
		return nil, err
	}
	cpu := meter.read(serverPID, peerPID).sub(<-cpuFrom)
	var workerCPU, workerCPUTo []float64
	if v.citus != nil {
		workerCPUTo, workerCPU = v.citus.cpu(), <-workerCPUFrom
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return nil, err
		}
	}
	time.Sleep(r.cfg.Settle)
	after, err := readCounters(ctx, pool, r.pgss)
	if err != nil {
		return nil, err
	}
	if after.RoundTrips, after.PeerTrips, err = roundTrips(ctx, v); err != nil {
		return nil, err
	}
	s := newSample(v.name, round, t, r.cfg.Duration)
	s.counters(before, after)
	if v.citus != nil {
		workersAfter, err := v.citus.counts(ctx, r.pgss, false)
		if err != nil {
			return nil, err
		}
		s.Workers = workerSamples(workersBefore, workersAfter, workerCPU, workerCPUTo, s.Total, s.Measured)
	}
	if s.Measured > 0 {
		s.CPU = cpu.per(float64(s.Measured) / 1000) // CPU ms per request
	}
	// The effects are counted after the CPU is read: the count is not
	// the requests' work.
	if len(t.sent) > 0 {
		if s.Effects, err = verifyEffects(ctx, v, t.sent); err != nil {
			return nil, err
		}
	}
	if last && r.pgss {
		if s.Top, err = topStatements(ctx, pool, 16); err != nil {
			return nil, err
		}
		if v.citus != nil {
			if s.WorkerTop, err = topStatements(ctx, v.citus.workers[0].pool, 16); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
