package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is one run of the harness.
type Config struct {
	Profile   Profile
	Modes     []string // idempotency modes, each run in turn on a database of its own
	Paymentsd string   // the paymentsd binary
	Bankd     string   // the bankd binary
	// NATSServer is the nats-server binary of the queue phase's cluster.
	NATSServer string
	Gateway    string // the idem-gateway binary, for the gateway phase
	Upstream   string // the gateway phase's upstream binary (cmd/internal/chaos/upstream)
	Seed       uint64
	Log        io.Writer // progress and failure details
	WorkDir    string    // replica logs go here
	// Failover, when set, runs on a pg_auto_failover formation instead
	// of a throwaway cluster.
	Failover *FailoverConfig
	// Citus, when set, runs on a Citus cluster of its own (a coordinator
	// and two workers) instead, every table distributed.
	Citus bool
}

// Run starts a PostgreSQL cluster (or formation, or Citus cluster), runs every mode against
// it, and returns one result per mode. An error means the harness itself
// could not run.
func Run(ctx context.Context, cfg Config) ([]*Result, error) {
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	var db Database
	var err error
	switch {
	case cfg.Failover != nil:
		fo := *cfg.Failover
		fo.LogDir = cfg.WorkDir
		db, err = StartFormation(ctx, fo)
	case cfg.Citus:
		db, err = StartCitus(ctx, 2)
	default:
		db, err = StartCluster(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if db.ProxyTarget() == "" && cfg.Profile.FaultEvery.Min > 0 {
		return nil, fmt.Errorf("profile %s: link faults need one server address; set FaultEvery to zero", cfg.Profile.Name)
	}
	fmt.Fprintf(cfg.Log, "chaos: %s\n", db.Describe())
	var results []*Result
	for i, mode := range cfg.Modes {
		if ctx.Err() != nil {
			break
		}
		m := &modeRun{Config: cfg, pg: db, mode: mode, seed: cfg.Seed + uint64(i)*1_000_003,
			stats: &Stats{}, logDir: filepath.Join(cfg.WorkDir, mode)}
		results = append(results, m.run(ctx))
	}
	return results, ctx.Err()
}

type modeRun struct {
	Config
	pg     Database
	mode   string
	seed   uint64
	stats  *Stats
	logDir string
	db     string // database name
}

func (m *modeRun) logf(format string, args ...any) {
	fmt.Fprintf(m.Log, "chaos: %s: "+format+"\n", append([]any{m.mode}, args...)...)
}

func (m *modeRun) run(ctx context.Context) *Result {
	start := time.Now()
	res := &Result{Mode: m.mode, Stats: m.stats}
	if m.mode == GatewayPhase {
		res.Verdict, res.Err = m.exerciseGateway(ctx)
	} else {
		res.Verdict, res.Err = m.exercise(ctx)
	}
	res.Elapsed = time.Since(start)
	if res.Err != nil {
		m.logf("error: %v", res.Err)
	}
	if res.Verdict != nil && len(res.Verdict.Details) > 0 {
		m.logf("%d findings; the first ones:", len(res.Verdict.Details))
		for _, d := range res.Verdict.Details[:min(len(res.Verdict.Details), 40)] {
			fmt.Fprintln(m.Log, "    "+d)
		}
	}
	return res
}

func (m *modeRun) exercise(ctx context.Context) (*Verdict, error) {
	p := m.Profile
	if err := os.MkdirAll(m.logDir, 0o755); err != nil {
		return nil, err
	}
	m.db = "chaos_" + strings.ReplaceAll(m.mode, "-", "_")
	direct := m.pg.DSN(m.db)
	if err := m.createDatabase(ctx); err != nil {
		return nil, err
	}
	if err := m.pg.Prepare(ctx, m.db); err != nil {
		return nil, err
	}
	if _, err := m.paymentsd(ctx, append([]string{"migrate", "--db", direct}, m.pg.MigrateFlags()...)...); err != nil {
		return nil, err
	}
	// One user per caller, one for the late caller, one for the racer,
	// then one per queue producer and one per payout caller.
	users := make([]*User, p.Workers+2+p.QueueProducers+p.Payouts.Callers)
	for i := range users {
		out, err := m.paymentsd(ctx, "users", "create", "--db", direct)
		if err != nil {
			return nil, err
		}
		users[i] = &User{}
		if err := json.Unmarshal(lastLine(out), users[i]); err != nil || users[i].ID == "" || users[i].APIKey == "" {
			return nil, fmt.Errorf("paymentsd users create printed %q, want {\"user_id\":…,\"api_key\":…}", out)
		}
	}

	pool, err := pgxpool.New(ctx, direct)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	queue, err := m.startQueue(ctx, users[p.Workers+2:p.Workers+2+p.QueueProducers])
	if err != nil {
		return nil, err
	}
	defer queue.Close()
	payers := users[p.Workers+2+p.QueueProducers:]
	users = users[:p.Workers+2]

	// Without link faults the replicas connect directly.
	var links *Links
	replicaURL := func(int) string { return direct }
	if p.FaultEvery.Min > 0 {
		if links, err = NewLinks(m.pg.ProxyTarget(), p.Replicas); err != nil {
			return nil, err
		}
		defer links.Close()
		replicaURL = func(i int) string { return pgURL(links.Addr(i), m.db) }
	}
	pay, err := newPayoutRun(ctx, p, m.Bankd, m.logDir, payers, m.stats, m.seed+97, m.logf)
	if err != nil {
		return nil, err
	}
	defer pay.close()
	serve := func(dbURL, ttl string) []string {
		return []string{"serve", "--addr", "127.0.0.1:0", "--metrics-addr=", "--db", dbURL, "--idempotency-mode", m.mode,
			"--idempotency-ttl", ttl, "--lease-duration", p.LeaseDuration.String()}
	}
	replicas := make([]*Replica, p.Replicas)
	for i := range replicas {
		args := append(serve(replicaURL(i), "48h"), queue.Args()...)
		replicas[i] = NewReplica(i, m.Paymentsd, m.logDir, append(args, pay.serveArgs()...))
	}
	// The caller who comes back after the retention has a replica of its
	// own, with a short TTL: the only place the harness shortens it.
	// Its sweeper runs often, so that by the time the caller comes back
	// its records may be gone and its keys released.
	late := NewReplica(len(replicas), m.Paymentsd, m.logDir,
		append(serve(direct, p.LateTTL.String()), "--sweep-interval", (p.LateTTL/3).String()))
	fleet := NewFleet(replicas, m.stats, m.Log)
	lateFleet := NewFleet([]*Replica{late}, &Stats{}, m.Log)
	life, endLife := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		endLife()
		bg.Wait()
		fleet.StopAll()
		lateFleet.StopAll()
	}()
	for _, r := range append(replicas, late) {
		if err := r.StartRetrying(ctx, 30*time.Second); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, r.LogTail(20))
		}
	}
	bg.Go(func() { fleet.Supervise(life) })
	bg.Go(func() { lateFleet.Supervise(life) })

	front, closeFront, err := m.serveBalancer(NewBalancer(replicas, p.UpstreamTimeout, p.BalancerAttempts, m.stats))
	if err != nil {
		return nil, err
	}
	defer closeFront()
	patientProf, patientTimeout := p.patient()
	patientFront, closePatient, err := m.serveBalancer(NewBalancer(replicas, patientTimeout, p.BalancerAttempts, m.stats))
	if err != nil {
		return nil, err
	}
	defer closePatient()
	lateFront, closeLate, err := m.serveBalancer(NewBalancer([]*Replica{late}, p.UpstreamTimeout, 1, &Stats{}))
	if err != nil {
		return nil, err
	}
	defer closeLate()

	patients := int(float64(p.Workers)*p.Patient + 0.5)
	stop := time.Now().Add(p.Duration)
	deadline := stop.Add(p.Drain)
	m.logf("%d replicas behind %s (and %s for %d patient callers), %d callers, faults for %s",
		p.Replicas, front, patientFront, patients, p.Workers, p.Duration)
	workers := make([]*Worker, p.Workers)
	for i := range workers {
		wp, base := p, front
		if i < patients {
			wp, base = patientProf, patientFront
		}
		workers[i] = NewWorker(i, users[i], base, wp, m.stats, m.seed+uint64(i))
		defer workers[i].Close()
	}
	lateWorker := &LateWorker{Worker: NewWorker(p.Workers, users[p.Workers], lateFront, p, m.stats, m.seed+99), ttl: p.LateTTL}
	defer lateWorker.Close()
	pay.startWorkers(front, p, p.Workers+2, m.seed+200)

	faults, endFaults := context.WithDeadline(ctx, stop)
	defer endFaults()
	racer := NewRacer(users[p.Workers+1], p, fleet, links, pool, front, m.stats, m.seed+98)
	racer.Log = m.logf
	defer racer.Close()

	var callers sync.WaitGroup
	for _, w := range workers {
		callers.Go(func() { w.Run(ctx, stop, deadline) })
	}
	if p.LateOps > 0 {
		callers.Go(func() { lateWorker.Run(ctx, deadline) })
	}
	callers.Go(func() { racer.Run(ctx, faults, deadline) })
	callers.Go(func() { queue.Run(ctx, faults, stop, stop.Add(p.QueueQuiet)) })
	pay.run(ctx, &callers, stop, deadline)
	pay.injectFaults(faults, p.Duration, m.seed)
	inj := &Injector{Prof: p, Fleet: fleet, Links: links, DB: m.pg, Stats: m.stats, Log: m.Log}
	progress := m.progress(faults)
	inj.Run(faults, life, m.seed)
	progress()

	// The faults are over: lift every one, bring every replica back, and
	// let the callers finish their retries.
	calm := time.Now()
	if links != nil {
		if err := links.Heal(); err != nil {
			return nil, err
		}
	}
	if err := pay.calm(ctx, pool); err != nil {
		return nil, err
	}
	if !fleet.AllUp(60 * time.Second) {
		return nil, errors.New("the replicas did not all come back after the faults")
	}
	m.logf("faults stopped; %d requests so far; waiting for the callers to finish their retries", m.stats.Requests.Load())
	callers.Wait()
	if err := pay.settle(ctx, pool); err != nil {
		return nil, err
	}
	// A lease of a killed replica runs out LeaseDuration after it was last
	// renewed, which is before the faults stopped.
	time.Sleep(time.Until(calm.Add(p.LeaseDuration + 500*time.Millisecond)))

	// Live locks are counted before the rechecks below make new requests.
	var live int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys
		WHERE status = 'PROCESSING' AND lease_expires_at > now()`).Scan(&live); err != nil {
		return nil, fmt.Errorf("count live locks: %w", err)
	}

	// "Hours later": every answered key is asked again, after every kill
	// and restart. The answer must not have changed.
	m.logf("callers done; asking every answered key again")
	var rechecks sync.WaitGroup
	for _, w := range append(workers, lateWorker.Worker) {
		rechecks.Go(func() { w.Recheck(ctx) })
	}
	rechecks.Go(func() { racer.Recheck(ctx) })
	pay.recheck(ctx, &rechecks)
	rechecks.Wait()

	ops := append(racer.Ops, pay.ops()...)
	for _, w := range append(workers, lateWorker.Worker) {
		ops = append(ops, w.Ops...)
	}
	m.logf("checking %d keys against the database", len(ops))
	// Reads back retry a few times: the faults are over, but a replica may
	// still be starting.
	api := NewClient(front, SDKConfig{Timeout: 10 * time.Second, MaxAttempts: 10, BaseBackoff: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, &Stats{})
	defer api.Close()
	v, err := Verify(ctx, pool, api, users, ops)
	if err != nil {
		return nil, err
	}
	if err := queue.Verify(ctx, pool, v); err != nil {
		return nil, err
	}
	if err := pay.verify(ctx, v, pool, api); err != nil {
		return nil, err
	}
	if n := m.stats.DBFaultErrors.Load(); n > 0 {
		v.fail(&v.DBFaults, "%d database disruptions did not complete (see the log above)", n)
		v.DBFaults = int(n)
	}
	if live > 0 {
		v.fail(&v.LiveLocks, "%d PROCESSING records held a live lock %s after the faults stopped (lock timeout %s)",
			live, p.LeaseDuration+500*time.Millisecond, p.LeaseDuration)
	}
	return v, nil
}

// progress prints a line every few seconds until ctx ends; the returned
// func waits for the last line.
func (m *modeRun) progress(ctx context.Context) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s := m.stats
			m.logf("%d requests, %d retries, %d replays, %d kills, %d link faults, %d database disruptions",
				s.Requests.Load(), s.Retries.Load(), s.Replays.Load(), s.Kills.Load(), s.ConnFaultTotal(), len(s.Outages()))
		}
	}()
	return func() { <-done }
}

func (m *modeRun) createDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, m.pg.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+m.db); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+m.db)
	return err
}

// paymentsd runs a one-shot paymentsd command and returns its stdout.
func (m *modeRun) paymentsd(ctx context.Context, args ...string) ([]byte, error) {
	return m.command(ctx, m.Paymentsd, args...)
}

// serveBalancer serves b on a loopback port.
func (m *modeRun) serveBalancer(b *Balancer) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		_ = srv.Close()
		b.Close()
	}, nil
}

func lastLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return []byte(lines[len(lines)-1])
}
