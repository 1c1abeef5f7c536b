// Command chaos runs paymentsd the way production does, breaks it while
// payments flow, and then proves from the database and from what every
// caller saw that no payment moved twice and no acknowledged payment was
// lost.
//
// On one machine, over loopback only, it starts a throwaway PostgreSQL
// cluster and, for each idempotency mode (atomic, leased), several
// paymentsd replicas behind a front proxy that retries on another replica
// after a timeout or a connection error, as a cloud load balancer does.
// Callers with retrying SDKs, double taps, dropped connections and a
// caller who comes back after the key's retention send deposits and
// conversions, and payouts that leave through a simulated bank (cmd/bankd,
// its faults on, itself killed and restarted), while replicas are
// SIGKILLed and restarted, the links between replicas and PostgreSQL are
// slowed, cut, reset and hung (toxiproxy, in-process), and PostgreSQL
// itself is restarted. Producers publish payment commands to the same
// replicas over NATS JetStream (a cluster of three nats-server processes,
// the leader of the payments stream SIGKILLed mid-run) with duplicates and
// retries. Then the faults stop, every caller finishes its
// retries, the completers finish every pending payout, and the invariants
// are checked, the payouts' against the bank's own record. A last phase
// runs idem-gateway replicas in front of two upstreams, one that
// deduplicates on the forwarded key and one that does not, under the same
// faults, and resolves the unknown outcomes with the gateway's keys
// commands. It prints one table and exits 1 when a must-be-0 figure is
// not 0. See docs/chaos.md.
//
//	go run ./cmd/chaos -profile short   # CI: both modes and the gateway phase
//	go run ./cmd/chaos -profile long    # the soak: 10 minutes per mode
//	go run ./cmd/chaos -failover        # on a pg_auto_failover formation, its primary killed (make test-failover)
//	go run ./cmd/chaos -citus           # on a Citus cluster, a worker restarted and a shard moved (make chaos-citus)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/chaos"
	"github.com/idem-dev/idem/cmd/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("chaos"))
		return
	}
	os.Exit(run())
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run() int {
	profile := flag.String("profile", "short", "short (CI, about 2 minutes) or long (the soak)")
	modes := flag.String("modes", "atomic-deferred,leased,gateway", "idempotency modes to run, comma-separated,\nand gateway, the gateway phase (idem-gateway replicas; not with -failover)")
	bin := flag.String("paymentsd", "", "a paymentsd binary to use instead of building ./cmd/paymentsd")
	bankd := flag.String("bankd", "", "a bankd binary to use instead of building ./cmd/bankd")
	natsServer := flag.String("nats-server", "", "a nats-server binary to use instead of building the one go.mod names")
	gateway := flag.String("idem-gateway", "", "an idem-gateway binary to use instead of building ./cmd/idem-gateway")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of every random choice")
	duration := flag.Duration("duration", 0, "traffic under faults per mode (default: the profile's)")
	workers := flag.Int("workers", 0, "callers (default: the profile's)")
	keep := flag.Bool("keep-logs", false, "keep the replicas' logs (their directory is printed)")
	failover := flag.Bool("failover", false, "run on a pg_auto_failover formation and SIGKILL its primary (profile failover unless -profile is given)")
	async := flag.Bool("failover-async", false, "with -failover: commits do not wait for a standby (the contrast; may lose acknowledged writes)")
	nodes := flag.Int("failover-nodes", 3, "with -failover: data nodes (a primary and its standbys)")
	citus := flag.Bool("citus", false, "run on a Citus cluster (a coordinator, two workers), restart a worker and move a shard (profile citus unless -profile is given)")
	flag.Parse()
	if *citus && (*failover || *async) {
		fmt.Fprintln(os.Stderr, "chaos: -citus and -failover are two databases; choose one")
		return 2
	}
	if *citus && !isSet("profile") {
		*profile = "citus"
	}
	var fo *chaos.FailoverConfig
	if *failover || *async {
		fo = &chaos.FailoverConfig{Nodes: *nodes, Async: *async}
		if !isSet("profile") {
			*profile = "failover"
		}
	}

	p, ok := chaos.Profiles[*profile]
	if !ok {
		fmt.Fprintf(os.Stderr, "chaos: unknown profile %q (want short, long, failover or citus)\n", *profile)
		return 2
	}
	if *duration > 0 {
		p.Duration = *duration
	}
	if *workers > 0 {
		p.Workers = *workers
	}
	var ms []string
	for m := range strings.SplitSeq(*modes, ",") {
		m = strings.TrimSpace(m)
		switch {
		case m == chaos.GatewayPhase && p.Gateway.Callers == 0 && isSet("modes"):
			fmt.Fprintf(os.Stderr, "chaos: profile %s has no gateway phase\n", p.Name)
			return 2
		case m == chaos.GatewayPhase && p.Gateway.Callers == 0:
			continue
		case m == chaos.GatewayPhase:
			ms = append(ms, m)
			continue
		}
		mode, err := idem.ParseMode(m)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: -modes: %v (or gateway)\n", err)
			return 2
		}
		ms = append(ms, mode.String())
	}
	// The binaries the phases run, built unless given.
	type binary struct {
		path *string
		pkg  string
	}
	var bins []binary
	gw := slices.Contains(ms, chaos.GatewayPhase)
	if len(ms) > 0 && (!gw || len(ms) > 1) {
		// nats-server is built from its Go module (its main package), at
		// the version the embedded servers of the tests are.
		bins = append(bins, binary{bin, "./cmd/paymentsd"}, binary{bankd, "./cmd/bankd"}, binary{natsServer, "github.com/nats-io/nats-server/v2"})
	}
	upstream := ""
	if gw {
		bins = append(bins, binary{gateway, "./cmd/idem-gateway"}, binary{&upstream, "./cmd/internal/chaos/upstream"})
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A watchdog: whatever hangs, the run ends.
	limit := time.Duration(len(ms))*(p.Duration+p.Drain+2*time.Minute) + 2*time.Minute
	if fo != nil {
		// The formation's nodes join one after the other, and each kill
		// waits for the killed node to rejoin.
		limit += time.Duration(fo.Nodes+p.DBRestarts) * 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	work, err := os.MkdirTemp("", "idem-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "chaos: logs in %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	var pkgs []string
	for _, b := range bins {
		if *b.path == "" {
			*b.path = filepath.Join(work, binName(b.pkg))
			pkgs = append(pkgs, b.pkg)
		}
	}
	if len(pkgs) > 0 {
		start := time.Now()
		build := exec.CommandContext(ctx, "go", append([]string{"build", "-o", work + string(filepath.Separator)}, pkgs...)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: go build %s (run from the repository root): %v\n", strings.Join(pkgs, " "), err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "chaos: built %s in %s; seed %d\n", strings.Join(pkgs, " "), time.Since(start).Round(time.Millisecond), *seed)
	}

	results, err := chaos.Run(ctx, chaos.Config{Profile: p, Modes: ms, Paymentsd: *bin, Bankd: *bankd, NATSServer: *natsServer,
		Gateway: *gateway, Upstream: upstream, Seed: *seed, Log: os.Stderr, WorkDir: work, Failover: fo, Citus: *citus})
	if err != nil && len(results) == 0 {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	fmt.Println()
	chaos.PrintTable(os.Stdout, p, results)
	code := 0
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		code = 1
	}
	for _, r := range results {
		if r.Failed() {
			code = 1
		}
	}
	verdict := "PASS"
	if code != 0 {
		verdict = "FAIL"
	}
	// The last line counts the invariants, one per mode and must-be-0
	// figure, in the form CI's log readers know.
	passed, failed := chaos.Tally(results)
	fmt.Printf("\nchaos: %s (seed %d; rerun with -seed %d)\nchaos: %d passed, %d failed\n", verdict, *seed, *seed, passed, failed)
	return code
}

// binName is the name go build -o DIR/ gives pkg's binary: its last path
// element, or the one before a major version suffix (nats-server/v2).
func binName(pkg string) string {
	dir, name := path.Split(pkg)
	if len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		return path.Base(dir)
	}
	return name
}
