package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The trivial handler (./trivial): decode a small JSON body, one INSERT
// into a table of its own, answer 201; served bare and behind the
// middleware in each way of holding a key, so that the table shows what
// idempotency costs a handler that costs almost nothing.

// createTrivial is the trivial handler's table.
const createTrivial = `
CREATE TABLE bench_trivial (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    text NOT NULL,
    amount     bigint NOT NULL,
    note       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)`

// trivialScopeHeader is the header the trivial server scopes keys by
// (trivial.ScopeHeader).
const trivialScopeHeader = "X-User-ID"

// trivialModes are the idem.Mode names the trivial handler is measured
// in: atomic with the claim deferred, atomic (claim first), leased.
var trivialModes = []string{"atomic-deferred", "atomic", "leased"}

// trivialSource is the trivial server's source in the repository, and
// where a baseline tree's build finds it (through go build -overlay);
// roundTripSource is the package it counts round trips with, placed at
// the same path in the tree.
const (
	trivialSource   = "cmd/internal/bench/trivial/main.go"
	trivialOverlay  = "cmd/benchtrivial/main.go"
	roundTripSource = "cmd/internal/roundtrip/roundtrip.go"
)

// buildTrivial builds the trivial server into dir: from the repository;
// for a baseline tree, from the tree's own source when it has one, else
// the repository's source compiled against that tree's core and store,
// placed in it by an overlay (the tree is not written to). Its cmd directory belongs to a module requiring the core
// and pgstore both before and after the split into modules.
func buildTrivial(ctx context.Context, dir, tree string) (string, error) {
	out := filepath.Join(dir, "trivial")
	if tree == "" {
		return out, goBuild(ctx, "", out, "./"+filepath.Dir(trivialSource))
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(tree)
	if err != nil {
		return "", err
	}
	out += "-baseline"
	if _, err := os.Stat(filepath.Join(abs, trivialSource)); err == nil {
		// The tree has the trivial server: its own source is the build
		// before, wired with that build's names.
		return out, goBuild(ctx, abs, out, "./"+filepath.Dir(trivialSource))
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(abs, trivialOverlay):  filepath.Join(root, trivialSource),
		filepath.Join(abs, roundTripSource): filepath.Join(root, roundTripSource),
	}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "trivial-overlay.json")
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		return "", err
	}
	return out, goBuild(ctx, abs, out, "-overlay", overlay, "./"+filepath.Dir(trivialOverlay))
}

// startTrivial starts the trivial server bin with the wirings named, each
// on an address of its own, and returns a server per wiring: one process,
// so that every wiring runs on the same pool and process.
func (r *runner) startTrivial(ctx context.Context, name, bin string, db *database, wirings []string) (map[string]*server, error) {
	pprofAddr := ""
	if r.cfg.PprofDir != "" {
		var err error
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	addrs := make([]string, len(wirings))
	listen := make([]string, len(wirings))
	for i, w := range wirings {
		var err error
		if addrs[i], err = freeAddr(); err != nil {
			return nil, err
		}
		listen[i] = w + "=" + addrs[i]
	}
	argv := []string{bin, "-db", db.url, "-listen", strings.Join(listen, ",")}
	if pprofAddr != "" {
		argv = append(argv, "-pprof", pprofAddr)
	}
	c, err := startChild(name, r.work, argv, []string{"GOMAXPROCS=" + strconv.Itoa(r.cfg.ServerProcs)}, nil)
	if err != nil {
		return nil, err
	}
	first := &server{child: c, name: name}
	r.servers = append(r.servers, first)
	out := map[string]*server{}
	for i, w := range wirings {
		s := &server{child: c, name: name + " " + w, base: "http://" + addrs[i], pprof: pprofAddr}
		s.trips = countAt(s.base+"/roundtrips", "")
		if err := s.waitHealthy(ctx); err != nil {
			return nil, err
		}
		out[w] = s
	}
	return out, nil
}

// legacyWiring names a wiring as a trivial server built before the
// wirings took their idem.Mode names knows it (a baseline): "atomic"
// then meant the deferred claim, and "claim-first" what ModeAtomic is.
var legacyWiring = strings.NewReplacer("atomic-deferred", "atomic", "atomic", "claim-first")

// startBaselineTrivial starts the baseline's trivial server with the
// current wirings, or, for a build from before their names, with the
// names it knows; either way its servers are keyed by the current names.
func (r *runner) startBaselineTrivial(ctx context.Context, db *database) (map[string]*server, error) {
	ws := trivialWirings(false)
	base, err := r.startTrivial(ctx, "trivial-baseline", r.baseTrivial, db, ws)
	if err == nil || !strings.Contains(err.Error(), "unknown wiring") {
		return base, err
	}
	legacy := make([]string, len(ws))
	for i, w := range ws {
		legacy[i] = legacyWiring.Replace(w)
	}
	old, err := r.startTrivial(ctx, "trivial-baseline", r.baseTrivial, db, legacy)
	if err != nil {
		return nil, err
	}
	base = make(map[string]*server, len(ws))
	for i, w := range ws {
		base[w] = old[legacy[i]]
	}
	return base, nil
}

// trivialWirings are the wirings of the current build: bare, and each
// mode with and without the replay cache; a baseline has no bare.
func trivialWirings(bare bool) []string {
	var ws []string
	if bare {
		ws = append(ws, "bare")
	}
	for _, m := range trivialModes {
		ws = append(ws, m, m+"-nocache")
	}
	return ws
}

// trivialVariants seeds each mode's replay keys through srv and returns
// the trivial handler's variants: bare (when srv has it), then per mode
// fresh, replay, and replay without the cache; suffix ends their names.
func (r *runner) trivialVariants(ctx context.Context, srv map[string]*server, db *database, suffix string) ([]*variant, error) {
	var vs []*variant
	if s := srv["bare"]; s != nil {
		vs = append(vs, &variant{name: "trivial bare", kind: kindBare, op: opTrivial, srv: s, db: db})
	}
	for _, mode := range trivialModes {
		seeds, err := seed(ctx, &variant{op: opTrivial, srv: srv[mode], db: db}, r.wl, r.cfg.ReplayKeys, r.cfg.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("trivial %s: %w", mode, err)
		}
		pick := func(rnd *rand.Rand) request { return seeds[rnd.IntN(len(seeds))] }
		vs = append(vs,
			&variant{name: "trivial fresh-" + mode + suffix, kind: kindFresh, op: opTrivial, mode: mode, srv: srv[mode], db: db},
			&variant{name: "trivial replay-" + mode + suffix, kind: kindReplay, op: opTrivial, mode: mode, srv: srv[mode], db: db, replay: pick},
			&variant{name: "trivial replay-" + mode + " (no cache)" + suffix, kind: kindReplay, op: opTrivial, mode: mode, srv: srv[mode+"-nocache"], db: db,
				replay: pick})
	}
	return vs, nil
}

// trivialRatios are the trivial handler's targets (docs/benchmarks.md,
// "What bounds each way of holding a key"): fresh and replay of each mode
// against bare.
func (rep *Report) trivialRatios() {
	fresh := map[string]float64{"atomic-deferred": 0.55, "atomic": 0.5, "leased": 0.45}
	for _, mode := range trivialModes {
		rep.ratio("trivial fresh/bare, "+mode, "trivial fresh-"+mode, "trivial bare", fmt.Sprintf("≥ %.2f", fresh[mode]), fresh[mode])
	}
	for _, mode := range trivialModes {
		rep.ratio("trivial replay/bare, "+mode, "trivial replay-"+mode, "trivial bare", "≥ 5", 5)
		rep.ratio("trivial replay/bare, "+mode+", no replay cache", "trivial replay-"+mode+" (no cache)", "trivial bare", "≥ 2", 2)
	}
}
