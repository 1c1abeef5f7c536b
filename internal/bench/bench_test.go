package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem/internal/bench"
	"github.com/idem-dev/idem/internal/pgtest"
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
		Rounds: 1, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, NoSettle: true,
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
		if r.Storm != nil {
			require.Zero(t, r.Storm.DoubleEffects, r.Variant)
			require.Zero(t, r.Storm.LostEffects, r.Variant)
			require.Zero(t, r.Storm.NetFired, r.Variant)
			require.Zero(t, r.Storm.BodyMismatch, r.Variant)
			require.Equal(t, r.Storm.Keys, r.Storm.Executed, r.Variant)
		}
	}
	for _, v := range []string{"fresh-atomic", "replay-atomic", "storm-atomic", "fresh-leased", "replay-leased", "storm-leased", "bare", "ceiling"} {
		require.True(t, names[v], "no row for %s", v)
	}
	require.Len(t, rep.Ratios, 6)
	for _, f := range []string{"results.md", "results.json", "results-throughput.png", "results-latency.png"} {
		st, err := os.Stat(filepath.Join(cfg.Out, f))
		require.NoError(t, err)
		require.Positive(t, st.Size(), f)
	}
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
