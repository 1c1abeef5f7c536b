// Command bench is the load generator behind make bench: it measures
// paymentsd on PostgreSQL (fresh, replayed and stormed requests in both
// idempotency modes) against the same handlers without idempotency and
// against the bare SQL of a fresh request; deposits over gRPC and as
// commands from NATS JetStream beside HTTP; payouts through bankd; and
// writes a Markdown table and PNG charts into results/bench (the sweep
// run: results/bench-sweep).
//
//	make bench                       # a throwaway durable cluster, the default run (about 40 minutes)
//	make bench-growth                # fresh and replay with 10 million keys against an empty table
//	make bench-gateway               # only idem-gateway, in front of upstreams in Go and Node
//	make bench-sweep                 # paymentsd's latency while 'paymentsd keys sweep' deletes 1M of 10M keys
//	make bench-citus                 # fresh and replay on a Citus cluster beside one PostgreSQL
//	DATABASE_URL=postgres://… go run ./cmd/bench [flags]
//
// It runs from the repository (it builds ./cmd/paymentsd). The servers are
// child processes; "bench serve" is the hidden command that runs the bare
// server and the NATS server. See cmd/internal/bench for how a run goes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/idem-dev/idem/cmd/internal/bench"
	"github.com/idem-dev/idem/cmd/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("bench"))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(bench.ServeMain(os.Args[2:]))
	}
	var (
		cfg      bench.Config
		variants string
	)
	flag.StringVar(&cfg.Out, "out", "", "results folder (default results/bench in the repository, results/bench-sweep for -sweep)")
	flag.IntVar(&cfg.Rounds, "rounds", 5, "rounds; each runs every variant once")
	flag.DurationVar(&cfg.Warmup, "warmup", 0, "warm-up per variant and round (default 3s)")
	flag.DurationVar(&cfg.Duration, "duration", 0, "measured window per variant and round (default 10s)")
	flag.IntVar(&cfg.Concurrency, "c", 16, "concurrent clients")
	flag.IntVar(&cfg.StormClients, "storm", 8, "clients sending each key of a storm at once")
	flag.IntVar(&cfg.Users, "users", 1000, "users the requests are spread over")
	flag.IntVar(&cfg.ReplayKeys, "replay-keys", 2000, "completed keys the replay variants pick from")
	flag.IntVar(&cfg.QueueWorkers, "queue-workers", 8, "paymentsd's --queue-workers for the queue variants")
	flag.IntVar(&cfg.ServerProcs, "server-procs", 2, "GOMAXPROCS of each server")
	flag.IntVar(&cfg.ClientProcs, "client-procs", 2, "GOMAXPROCS of the generator")
	flag.StringVar(&variants, "variants", "", "comma-separated variants to run (default all)")
	flag.StringVar(&cfg.Baseline, "baseline", "", "an earlier build whose fresh and replay variants run beside this one's: a source tree (e.g. a git worktree of an earlier commit; its paymentsd and the trivial handler are built against it) or a paymentsd binary")
	flag.BoolVar(&cfg.SelfServer, "self-server", false, "serve the idempotent variants with the bench's own wiring of paymentsd (for -pprof)")
	flag.StringVar(&cfg.PprofDir, "pprof", "", "save a CPU profile of each bench-wired server and of idem-gateway over the last round's windows here")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the schema")
	flag.BoolVar(&cfg.Memory, "memory", false, "the memory run: paymentsd's peak resident memory (VmHWM) under hostile uploads (results/bench/memory.md)")
	flag.BoolVar(&cfg.GatewayOnly, "gateway", false, "the gateway run: only idem-gateway on PostgreSQL in front of an upstream in Go and one in Node, against each called directly (results/bench/gateway.md; a few minutes)")
	flag.StringVar(&cfg.MemoryOnly, "memory-only", "", "with -memory, only the loads whose name contains this text (e.g. idem-gateway)")
	citus := flag.Bool("citus", false, "the Citus run: fresh and replay in both modes and the bare server on the Citus coordinator of CITUS_URL "+
		"(its workers in CITUS_WORKER_URLS, separated by spaces), each beside the same on the one PostgreSQL of DATABASE_URL (results/bench/citus; make bench-citus)")
	flag.BoolVar(&cfg.Growth, "growth", false, "the growth run: fresh and replay with -growth-rows keys against an empty table")
	rewrite := flag.String("rewrite", "", "write the Markdown and charts of an earlier run again from its JSON (results/bench/results.json, growth.json, results/bench-sweep/sweep.json), without running")
	flag.IntVar(&cfg.GrowthRows, "growth-rows", 10_000_000, "rows preloaded into the key table for -growth")
	flag.BoolVar(&cfg.Sweep, "sweep", false, "the sweep run: paymentsd's latency under an open-loop load while 'paymentsd keys sweep' deletes the expired keys (results/bench-sweep)")
	flag.IntVar(&cfg.SweepRows, "sweep-rows", 10_000_000, "COMPLETED records preloaded into the key table for -sweep")
	flag.IntVar(&cfg.SweepExpired, "sweep-expired", 1_000_000, "of the -sweep-rows records, how many are past retention")
	flag.IntVar(&cfg.SweepRate, "sweep-rate", 400, "requests a second of -sweep's open-loop load, half fresh, half replays")
	flag.DurationVar(&cfg.SweepWindow, "sweep-window", 0, "-sweep runs the sweep in windows this long, alternating with windows where it is stopped (default 5s)")
	flag.DurationVar(&cfg.SweepBaseline, "sweep-baseline", 0, "-sweep's load without the sweep, before it (default 30s)")
	flag.Parse()
	if variants != "" {
		cfg.Variants = strings.Split(variants, ",")
	}
	if *rewrite != "" {
		rep, err := bench.Rewrite(*rewrite)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(rep.Markdown(""))
		return
	}
	cfg.DatabaseURL = os.Getenv("DATABASE_URL")
	if *citus {
		if cfg.CitusURL = os.Getenv("CITUS_URL"); cfg.CitusURL == "" {
			log.Fatal("bench: -citus needs CITUS_URL, the coordinator (make bench-citus starts a cluster)")
		}
		cfg.CitusWorkers = strings.Fields(os.Getenv("CITUS_WORKER_URLS"))
	}
	log.SetFlags(log.Ltime)
	cfg.Logf = log.Printf

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		// A failed sweep run still has its report: what went wrong is in it.
		fmt.Print(rep.Markdown(""))
	}
	if err != nil {
		log.Fatal(err)
	}
}
