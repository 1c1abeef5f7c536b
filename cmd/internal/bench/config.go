package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Config configures a run. Its zero value is the default run of make bench
// except for DatabaseURL, which is required.
type Config struct {
	// DatabaseURL is the PostgreSQL server to measure. Each run works in a
	// schema of its own, dropped at the end unless Keep. Required.
	DatabaseURL string
	// Out is the results folder. Default results/bench under the module
	// root, results/bench-sweep for Sweep.
	Out string
	// Rounds is how many times each variant runs. Default 5: on a shared
	// machine one variant's window can fall on a slow spell, and the median
	// of five rounds stands against two.
	Rounds int
	// Warmup is the unmeasured load before each measured window. Default 3s.
	Warmup time.Duration
	// Duration is each measured window. Default 10s.
	Duration time.Duration
	// Concurrency is the number of clients, each with its own keep-alive
	// connection (a storm uses them in groups of StormClients). Default 16.
	Concurrency int
	// StormClients is how many clients send each key of a storm at once.
	// Default 8.
	StormClients int
	// Users is how many users the requests are spread over. Default 1000.
	Users int
	// ReplayKeys is how many completed keys the replay variants pick from.
	// Default 2000.
	ReplayKeys int
	// QueueWorkers is paymentsd's --queue-workers for the commands from
	// NATS JetStream: commands processed at once. Default 8, paymentsd's.
	QueueWorkers int
	// ServerProcs is the GOMAXPROCS of each server process (the bank and
	// the NATS server too). Default 2.
	ServerProcs int
	// ClientProcs is the GOMAXPROCS of the generator. Default 2.
	ClientProcs int
	// Settle is the pause after each window before the database's counters
	// are read: PostgreSQL publishes a backend's statistics up to a second
	// late. Default 1.2s; zero in tests by NoSettle.
	Settle   time.Duration
	NoSettle bool
	// Variants, when set, runs only the variants named (see AllVariants).
	Variants []string
	// Paymentsd is a paymentsd binary to use; default: go build it once.
	Paymentsd string
	// Gateway is an idem-gateway binary to use in the main run; default: go
	// build it once.
	Gateway string
	// Self is the command that runs this package's Serve (the bare server,
	// and paymentsd's wiring with a pprof endpoint for SelfServer), with
	// SelfEnv added to its environment. Default: this executable's "serve"
	// command.
	Self    []string
	SelfEnv []string
	// Baseline, when set, is an earlier build measured beside this one: a
	// source tree (a worktree of an earlier commit, before or after the
	// split into modules), whose paymentsd and trivial server (the
	// repository's source, compiled against that tree's core) are built;
	// or a paymentsd binary, then without the trivial handler. Its fresh
	// and replay variants are added, named "… (baseline)", with the ratio
	// of each of this build's to its own.
	Baseline string
	// SelfServer serves the idempotent variants with Self's wiring of
	// paymentsd (the same handlers, store and middleware) instead of the
	// paymentsd binary, so that PprofDir can profile them.
	SelfServer bool
	// PprofDir, when set, receives a CPU profile of each Self server over
	// one measured window of the last round.
	PprofDir string
	// Keep keeps the schema (its name is logged).
	Keep bool
	// Growth runs the growth comparison instead of the main run: fresh and
	// replay against a key table preloaded with GrowthRows rows, alternating
	// with an empty one.
	Growth     bool
	GrowthRows int
	// Sweep runs the sweep comparison instead of the main run (sweep.go):
	// paymentsd serves an open-loop load on a key table preloaded with
	// SweepRows COMPLETED records, SweepExpired of them past retention,
	// while `paymentsd keys sweep` deletes them in windows of SweepWindow
	// that alternate with windows where it is stopped, after a baseline of
	// SweepBaseline without it. SweepRate is the load's requests a second.
	// Defaults 10 000 000 rows, 1 000 000 expired, 400 req/s, 5s windows,
	// 30s of baseline.
	Sweep bool
	// Memory runs the memory table instead of the main run (memory.go):
	// paymentsd's peak resident memory under hostile uploads.
	Memory bool
	// GatewayOnly runs only idem-gateway's variants (gateway.go), in
	// front of its upstreams in Go and Node and against them called
	// directly, into gateway.md.
	GatewayOnly bool
	// CitusURL, when set, runs the Citus comparison instead of the main
	// run (citus.go): paymentsd's fresh and replay in both modes, and the
	// bare server, on a Citus coordinator whose tables `paymentsd migrate
	// --citus` distributed, each right behind the same variant on the one
	// PostgreSQL of DatabaseURL. CitusWorkers are the workers' URLs, read
	// for their share of the requests.
	CitusURL     string
	CitusWorkers []string
	// MemoryOnly runs only the memory loads whose name contains it.
	MemoryOnly    string
	SweepRows     int
	SweepExpired  int
	SweepRate     int
	SweepWindow   time.Duration
	SweepBaseline time.Duration
	// Logf receives progress lines. Default: discard.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() (Config, error) {
	if c.DatabaseURL == "" {
		return c, errors.New("bench: no database: set DATABASE_URL (make bench starts a throwaway cluster)")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Rounds, 5)
	def(&c.Concurrency, 16)
	def(&c.StormClients, 8)
	def(&c.Users, 1000)
	def(&c.ReplayKeys, 2000)
	def(&c.QueueWorkers, 8)
	def(&c.ServerProcs, 2)
	def(&c.ClientProcs, 2)
	def(&c.GrowthRows, 10_000_000)
	def(&c.SweepRows, 10_000_000)
	def(&c.SweepExpired, 1_000_000)
	def(&c.SweepRate, 400)
	if c.Warmup == 0 {
		c.Warmup = 3 * time.Second
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.SweepWindow == 0 {
		c.SweepWindow = 5 * time.Second
	}
	if c.SweepBaseline == 0 {
		c.SweepBaseline = 30 * time.Second
	}
	if c.Settle == 0 && !c.NoSettle {
		c.Settle = 1200 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.ClientProcs > runtime.NumCPU() {
		c.ClientProcs = runtime.NumCPU()
	}
	if c.Concurrency < c.StormClients {
		return c, fmt.Errorf("bench: concurrency %d is below the %d clients of a storm", c.Concurrency, c.StormClients)
	}
	if c.Rounds < 1 || c.Duration < 0 || c.Warmup < 0 || c.Users < 1 || c.ReplayKeys < 1 {
		return c, errors.New("bench: rounds, users and replay keys must be positive")
	}
	runs := 0
	for _, on := range []bool{c.Growth, c.Sweep, c.Memory, c.GatewayOnly, c.CitusURL != ""} {
		if on {
			runs++
		}
	}
	if runs > 1 {
		return c, errors.New("bench: -growth, -sweep, -memory, -gateway and -citus are runs of their own: choose one")
	}
	if c.CitusURL != "" && len(c.CitusWorkers) == 0 {
		return c, errors.New("bench: the Citus run needs the workers' URLs (CITUS_WORKER_URLS)")
	}
	if c.Sweep && (c.SweepExpired < 0 || c.SweepExpired >= c.SweepRows || c.SweepRate < 1 || c.SweepWindow < 0 || c.SweepBaseline < 0) {
		return c, fmt.Errorf("bench: the sweep run needs 0 ≤ expired (%d) < rows (%d), a positive rate and positive durations",
			c.SweepExpired, c.SweepRows)
	}
	return c, nil
}
