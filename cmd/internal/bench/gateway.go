package bench

import (
	"context"
	_ "embed" // the Node upstream and the profiling overlay
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The gateway's variants: idem-gateway on PostgreSQL (leased, its keys in
// the run's schema) in front of an upstream that does what a real one
// does — decode a small JSON body, one durable INSERT into bench_trivial,
// answer 201 — against that upstream called directly. The upstream is
// written in Go (the trivial server's bare wiring) and in Node
// (upstream/upstream.mjs, on npm's pg). The gateway run (Config.GatewayOnly)
// runs only these.

// gatewayTripsMetric is idem-gateway's count of round trips to PostgreSQL
// on its /metrics.
const gatewayTripsMetric = "idem_gateway_postgres_round_trips_total"

// nodePg is the node-postgres release the Node upstream is installed with.
const nodePg = "pg@8"

//go:embed upstream/upstream.mjs
var nodeUpstream []byte

//go:embed upstream/pprof.go.in
var gatewayPprof []byte

// upstreams are the languages the gateway is measured in front of.
var upstreamLangs = []string{"go", "node"}

// gatewayVariants starts an idem-gateway in front of each upstream (goUp,
// the trivial server's bare wiring, and the Node upstream it starts),
// seeds its replay keys, and returns per upstream gateway-fresh,
// gateway-replay and the upstream called directly, every key checked.
func (r *runner) gatewayVariants(ctx context.Context, db *database, goUp *server) ([]*variant, error) {
	nodeUp, err := r.startNodeUpstream(ctx, db)
	if err != nil {
		return nil, err
	}
	// The trivial server's name is its wiring's; the report names the
	// upstream.
	named := *goUp
	named.name = "upstream-go"
	goUp = &named
	var vs []*variant
	for _, lang := range upstreamLangs {
		up := goUp
		if lang == "node" {
			up = nodeUp
		}
		gvs, err := r.gatewayPair(ctx, r.cfg.Gateway, "", lang, up, db)
		if err != nil {
			return nil, err
		}
		vs = append(vs, gvs...)
		if r.baseGateway != "" {
			if gvs, err = r.gatewayPair(ctx, r.baseGateway, " (baseline)", lang, up, db); err != nil {
				return nil, err
			}
			vs = append(vs, gvs...)
		}
		vs = append(vs, &variant{name: "upstream " + lang, kind: kindBare, op: opTrivial, srv: up, db: db, checked: true})
	}
	return vs, nil
}

// gatewayPair starts the idem-gateway binary bin in front of up, seeds
// its replay keys and returns its fresh and replay variants, their names
// ending in lang and suffix.
func (r *runner) gatewayPair(ctx context.Context, bin, suffix, lang string, up *server, db *database) ([]*variant, error) {
	gw, err := r.startGatewayBin(ctx, bin, up, db, append(scopeFlags(ctx, bin), "--log-level", "warn")...)
	if err != nil {
		return nil, err
	}
	r.cfg.Logf("seeding %d completed keys through idem-gateway%s in front of the %s upstream", r.cfg.ReplayKeys, suffix, lang)
	seeds, err := seed(ctx, &variant{op: opTrivial, srv: gw, db: db}, r.wl, r.cfg.ReplayKeys, r.cfg.Concurrency)
	if err != nil {
		return nil, fmt.Errorf("gateway%s, %s upstream: %w", suffix, lang, err)
	}
	pick := func(rnd *rand.Rand) request { return seeds[rnd.IntN(len(seeds))] }
	return []*variant{
		{name: "gateway-fresh " + lang + suffix, kind: kindFresh, op: opTrivial, mode: "leased", srv: gw, peer: up, db: db, checked: true},
		{name: "gateway-replay " + lang + suffix, kind: kindReplay, op: opTrivial, mode: "leased", srv: gw, peer: up, db: db, checked: true,
			replay: pick},
	}, nil
}

// scopeFlags scope bin's keys by the trivial server's user header,
// hashed: declared a credential, as the gateway requires of any header
// but Authorization; a baseline built before that took it as
// --scope-header.
func scopeFlags(ctx context.Context, bin string) []string {
	help, _ := exec.CommandContext(ctx, bin, "serve", "--help").Output()
	if strings.Contains(string(help), "--scope-credential-header") {
		return []string{"--scope-credential-header", trivialScopeHeader}
	}
	return []string{"--scope-header", trivialScopeHeader}
}

// startNodeUpstream installs node-postgres into a folder of the run's,
// beside the Node upstream's source, and starts it on db.
func (r *runner) startNodeUpstream(ctx context.Context, db *database) (*server, error) {
	dir := filepath.Join(r.work, "node-upstream")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "upstream.mjs"), nodeUpstream, 0o644); err != nil {
		return nil, err
	}
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("bench: the Node upstream needs %s on the PATH: %w", bin, err)
		}
	}
	r.cfg.Logf("installing %s for the Node upstream", nodePg)
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel", "error", nodePg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: npm install %s: %v\n%s", nodePg, err, b)
	}
	s, err := startServer(ctx, "upstream-node", r.work, r.cfg.ServerProcs, nil, func(addr string) []string {
		return []string{"node", filepath.Join(dir, "upstream.mjs"), addr, r.cfg.DatabaseURL, db.schema}
	})
	if err != nil {
		return nil, err
	}
	s.trips = countAt(s.base+"/roundtrips", "")
	r.servers = append(r.servers, s)
	return s, nil
}

// buildGateway builds idem-gateway into the run's folder; with PprofDir,
// with net/http/pprof added by an overlay, served on $IDEM_BENCH_PPROF.
func (r *runner) buildGateway(ctx context.Context) (string, error) {
	if r.cfg.PprofDir == "" {
		return buildCommand(ctx, r.work, "idem-gateway")
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(r.work, "gateway-pprof.go")
	if err := os.WriteFile(src, gatewayPprof, 0o644); err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(root, "cmd", "idem-gateway", "zz_bench_pprof.go"): src,
	}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(r.work, "gateway-overlay.json")
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(r.work, "idem-gateway")
	return out, goBuild(ctx, "", out, "-overlay", overlay, "./cmd/idem-gateway")
}

// gateway is the gateway run: only the gateway's variants, on a schema of
// their own.
func (r *runner) gateway(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	db, machine, err := r.open(ctx, "bench")
	if err != nil {
		return nil, err
	}
	defer r.dispose(ctx, db)
	r.pgss = enablePgss(ctx, db.pool)
	r.cpu = newCPUMeter(ctx, db.pool)
	cfg.Logf("building the trivial server")
	if r.trivial, err = buildTrivial(ctx, r.work, ""); err != nil {
		return nil, err
	}
	trivial, err := r.startTrivial(ctx, "trivial", r.trivial, db, []string{"bare"})
	if err != nil {
		return nil, err
	}
	vs, err := r.gatewayVariants(ctx, db, trivial["bare"])
	if err != nil {
		return nil, err
	}
	if vs, err = r.only(pairBaselines(vs)); err != nil {
		return nil, err
	}
	return r.measure(ctx, machine, vs, nil)
}

// gatewayRatios are the gateway's targets (issue: the gateway, fast):
// fresh at least half the upstream called directly, a replay at least
// 1.5 times it — cheaper than the work it saves.
func (rep *Report) gatewayRatios() {
	for _, lang := range upstreamLangs {
		rep.ratio("gateway fresh/upstream direct, "+lang, "gateway-fresh "+lang, "upstream "+lang, "≥ 0.5", 0.5)
		rep.ratio("gateway replay/upstream direct, "+lang, "gateway-replay "+lang, "upstream "+lang, "≥ 1.5", 1.5)
		rep.ratio("gateway replay/fresh, "+lang, "gateway-replay "+lang, "gateway-fresh "+lang, "", 0)
	}
	if rep.Gateway {
		rep.baselineRatios()
	}
}
