package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/cmd/internal/bench"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// The test binary doubles as the benchmark's own server (the bare wiring),
// as cmd/bench's hidden serve command does.
func TestMain(m *testing.M) {
	if os.Getenv("IDEM_BENCH_SERVE") == "1" {
		os.Exit(bench.ServeMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func tiny(t *testing.T) bench.Config {
	exe, err := os.Executable()
	require.NoError(t, err)
	return bench.Config{
		DatabaseURL: pgtest.URL(), Out: t.TempDir(),
		Rounds: 1, Warmup: 300 * time.Millisecond, Duration: time.Second, NoSettle: true,
		Concurrency: 8, StormClients: 8, Users: 8, ReplayKeys: 16,
		Self: []string{exe}, SelfEnv: []string{"IDEM_BENCH_SERVE=1"},
		Logf: t.Logf,
	}
}

// TestRun runs make bench's tool end to end with tiny durations, so that
// it cannot rot: every variant answers as it should, the storms make one
// effect per key, and the report, its JSON and its charts are written.
func TestRun(t *testing.T) {
	t.Parallel()
	cfg := tiny(t)
	rep, err := bench.Run(context.Background(), cfg)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, r := range rep.Rows {
		names[r.Variant] = true
		require.Positive(t, r.Requests, r.Variant)
		require.Zero(t, r.Bad, "%s answered unexpectedly: %v", r.Variant, r.Outcomes)
		if strings.HasPrefix(r.Variant, "trivial fresh") || r.Variant == "trivial bare" {
			require.GreaterOrEqual(t, r.TripsPerReq, 1.0, "round trips of %s", r.Variant)
		}
		if r.Effects != nil {
			require.Zero(t, r.Effects.DoubleEffects, r.Variant)
			require.Zero(t, r.Effects.LostEffects, r.Variant)
			require.Zero(t, r.Effects.NetFired, r.Variant)
			require.Zero(t, r.Effects.BodyMismatch, r.Variant)
		}
		if strings.HasPrefix(r.Variant, "storm-") {
			require.Equal(t, r.Effects.Keys, r.Effects.Executed, r.Variant)
		}
	}
	doors(t, rep)
	for _, v := range []string{"fresh-atomic-deferred", "replay-atomic-deferred", "storm-atomic-deferred", "fresh-leased", "replay-leased", "storm-leased",
		"fresh-atomic-deferred (no cache)", "replay-atomic-deferred (no cache)", "fresh-leased (no cache)", "replay-leased (no cache)", "bare", "ceiling",
		"gateway-fresh go", "gateway-replay go", "upstream go", "gateway-fresh node", "gateway-replay node", "upstream node",
		"trivial bare", "trivial fresh-atomic-deferred", "trivial replay-atomic-deferred", "trivial replay-atomic-deferred (no cache)",
		"trivial fresh-atomic", "trivial replay-atomic", "trivial replay-atomic (no cache)",
		"trivial fresh-leased", "trivial replay-leased", "trivial replay-leased (no cache)",
		"deposit-fresh", "deposit-replay", "grpc deposit-fresh", "grpc deposit-replay",
		"queue deposit-fresh", "queue deposit-duplicate", "payout-fresh", "payout-replay"} {
		require.True(t, names[v], "no row for %s", v)
	}
	require.Len(t, rep.Ratios, 34)
	for _, f := range []string{"results.md", "results.json", "results-throughput.png", "results-latency.png"} {
		st, err := os.Stat(filepath.Join(cfg.Out, f))
		require.NoError(t, err)
		require.Positive(t, st.Size(), f)
	}
}

// doors checks the variants of the doors other than a conversion over
// HTTP against real processes (paymentsd, bankd, a NATS server): every
// fresh key took effect once (a ledger row, and one transfer at the bank
// for a payout), every replay or duplicate was answered without running
// the handler, and the costs per request are there.
func doors(t *testing.T, rep *bench.Report) {
	t.Helper()
	for _, r := range rep.Rows {
		fresh := strings.HasSuffix(r.Variant, "deposit-fresh") || r.Variant == "payout-fresh"
		replay := strings.HasSuffix(r.Variant, "deposit-replay") || r.Variant == "queue deposit-duplicate" || r.Variant == "payout-replay"
		if !fresh && !replay {
			continue
		}
		e := r.Effects
		require.NotNil(t, e, "%s: no effect check", r.Variant)
		require.Positive(t, e.Keys, r.Variant)
		if fresh {
			require.Equal(t, e.Keys, e.Executed, "%s: every key executed once", r.Variant)
			require.GreaterOrEqual(t, r.TripsPerReq, 2.0, "%s: authentication, then the work", r.Variant)
			require.Positive(t, r.CPU.Postgres, r.Variant)
		} else {
			require.Zero(t, e.Executed, "%s: a replay never runs the handler", r.Variant)
			require.Less(t, r.TripsPerReq, 3.0, "%s: a replay reads, at most", r.Variant)
		}
		require.Less(t, r.TripsPerReq, 20.0, r.Variant)
		require.Positive(t, r.CPU.Server, r.Variant)
		switch {
		case r.Variant == "payout-fresh":
			require.Equal(t, "bankd", r.Peer)
			require.Positive(t, r.CPU.Peer, r.Variant)
		case strings.HasPrefix(r.Variant, "queue"):
			require.Equal(t, "nats-server", r.Peer)
			require.Positive(t, r.CPU.Peer, r.Variant)
		}
	}
}

// TestGateway runs the gateway run end to end with tiny durations:
// idem-gateway in front of the Go and the Node upstream, and each
// upstream called directly. Every key takes effect once (one row of the
// upstream's INSERT), a fresh request costs the gateway its claim and its
// completion and the upstream its INSERT, a replay costs neither.
func TestGateway(t *testing.T) {
	t.Parallel()
	cfg := tiny(t)
	cfg.GatewayOnly = true
	rep, err := bench.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Rows, 6)
	for _, r := range rep.Rows {
		require.Positive(t, r.Requests, r.Variant)
		require.Zero(t, r.Bad, "%s answered unexpectedly: %v", r.Variant, r.Outcomes)
		e := r.Effects
		require.NotNil(t, e, "%s: no effect check", r.Variant)
		require.Zero(t, e.DoubleEffects, r.Variant)
		require.Zero(t, e.LostEffects, r.Variant)
		require.Zero(t, e.BodyMismatch, r.Variant)
		require.Positive(t, r.CPU.Server, r.Variant)
		switch {
		case strings.HasPrefix(r.Variant, "gateway-fresh"):
			require.Equal(t, e.Keys, e.Executed, r.Variant)
			require.InDelta(t, 2.0, r.TripsPerReq, 0.2, "%s: the claim and the completion", r.Variant)
			require.InDelta(t, 1.0, r.PeerTripsPerReq, 0.2, "%s: the upstream's INSERT", r.Variant)
			require.Positive(t, r.CPU.Peer, r.Variant)
		case strings.HasPrefix(r.Variant, "gateway-replay"):
			require.Zero(t, e.Executed, r.Variant)
			require.Less(t, r.TripsPerReq, 0.5, "%s: replays come from the cache", r.Variant)
			require.Less(t, r.PeerTripsPerReq, 0.1, "%s: the upstream is not called", r.Variant)
		default:
			require.InDelta(t, 1.0, r.TripsPerReq, 0.2, "%s: its INSERT", r.Variant)
		}
	}
	require.Len(t, rep.Ratios, 6)
	_, err = os.Stat(filepath.Join(cfg.Out, "gateway.md"))
	require.NoError(t, err)
}

// TestGrowth runs the growth comparison with a small preload.
func TestGrowth(t *testing.T) {
	t.Parallel()
	cfg := tiny(t)
	cfg.Growth, cfg.GrowthRows = true, 2000
	rep, err := bench.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.Rows, 10)
	for _, r := range rep.Rows {
		require.Positive(t, r.Requests, r.Variant)
		require.Zero(t, r.Bad, "%s answered unexpectedly: %v", r.Variant, r.Outcomes)
	}
	require.Len(t, rep.Ratios, 6)
	_, err = os.Stat(filepath.Join(cfg.Out, "growth-throughput.png"))
	require.NoError(t, err)
}

// TestSweep runs the sweep comparison end to end at a tiny size: paymentsd
// answers every request of the load as it should while `paymentsd keys
// sweep`, stopped and resumed in windows, deletes every expired record and
// nothing else; the report and its JSON are written.
func TestSweep(t *testing.T) {
	t.Parallel()
	cfg := tiny(t)
	cfg.Sweep, cfg.SweepRows, cfg.SweepExpired = true, 20_000, 5_000
	cfg.SweepRate, cfg.SweepWindow, cfg.SweepBaseline = 100, 200*time.Millisecond, time.Second
	rep, err := bench.Run(context.Background(), cfg)
	require.NoError(t, err)
	s := rep.Sweep
	require.NotNil(t, s)
	require.Equal(t, 5_000, s.Deleted)
	require.Empty(t, s.Unexpected)
	require.Equal(t, bench.SweepCheck{Live: 15_000, LiveWant: 15_000, Fresh: s.Check.FreshWant, FreshWant: s.Check.FreshWant}, s.Check)
	require.Positive(t, s.Check.FreshWant)
	require.Positive(t, s.RowsPerSecond)
	require.Len(t, s.Phases, 3)
	for _, p := range s.Phases {
		require.Positive(t, p.Windows, p.Name)
		for _, l := range p.Requests {
			require.Positive(t, l.Count, "%s, %s", p.Name, l.Kind)
			require.Positive(t, l.P99, "%s, %s", p.Name, l.Kind)
		}
	}
	require.Len(t, s.Ratios, 7, "six ratios of the phases, one of the pairs of windows")
	for _, f := range []string{"sweep.md", "sweep.json"} {
		st, err := os.Stat(filepath.Join(cfg.Out, f))
		require.NoError(t, err)
		require.Positive(t, st.Size(), f)
	}
}
