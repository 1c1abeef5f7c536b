package chaos

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// GatewayPhase is the -modes name of the gateway phase: idem-gateway
// replicas in front of two upstreams, one that deduplicates on the
// forwarded key and one that does not, under the same faults as paymentsd.
const GatewayPhase = "gateway"

// GatewayProfile sizes the gateway phase.
type GatewayProfile struct {
	// Callers send requests through the gateway, each as a user of its
	// own; 0 for no gateway phase.
	Callers int
	// UpstreamTimeout is the routes' upstream_timeout; SlowDelay the
	// upstreams' slow answers, longer, so a slow answer is an unknown
	// outcome.
	UpstreamTimeout, SlowDelay time.Duration
	// DedupFaults and PlainFaults are the upstreams' --faults (bankd's
	// kinds) while the faults last. The one that does not deduplicate
	// never answers 5xx after acting (error-after): no proxy could retry
	// that upstream safely.
	DedupFaults, PlainFaults string
	// Quiet bounds the wait, after the callers are done, for every record
	// to be final.
	Quiet time.Duration
}

// The upstreams' faults while the faults last, bankd's kinds: the slow and
// hung answers outlast the routes' upstream timeout (unknown outcomes),
// the resets break the answer after the effect.
const (
	dedupFaults = "error-before=0.03,error-after=0.03,slow-after=0.04,reset-after=0.03,hang=0.02"
	plainFaults = "error-before=0.03,slow-after=0.04,reset-after=0.03,hang=0.02"
)

// OpEffect is a POST to an upstream behind the gateway: one effect.
const OpEffect OpKind = "effect"

// gatewayRoutes are the gateway's two upstreams, by path prefix.
var gatewayRoutes = []struct{ name, path string }{{"dedup", "/dedup/effects"}, {"plain", "/plain/effects"}}

// gatewayConfig is the configuration file the replicas serve: one route
// per upstream, keys required, the dedup one upstream_dedups.
func gatewayConfig(p Profile, dedupURL, plainURL string) string {
	return fmt.Sprintf(`log: {level: info}
upstreams:
  - {name: dedup, url: %q, prefix: /dedup/}
  - {name: plain, url: %q, prefix: /plain/}
defaults:
  key: required
  ttl: 48h
  lease: %s
  upstream_timeout: %s
routes:
  - {match: "POST /dedup/*", upstream_dedups: true}
  - {match: "POST /plain/*", upstream_dedups: false}
`, dedupURL, plainURL, p.LeaseDuration, p.Gateway.UpstreamTimeout)
}

// gatewayWorker is a caller of the gateway: one user, one request at a
// time to either upstream, delivered as every caller does (SDK, double
// taps, dropped connections).
type gatewayWorker struct{ *Worker }

// Run makes requests until stop, then lets the last one finish its
// retries until deadline.
func (w *gatewayWorker) Run(ctx context.Context, stop, deadline time.Time) {
	for seq := 0; seq < w.prof.MaxOps && time.Now().Before(stop) && ctx.Err() == nil; seq++ {
		r := gatewayRoutes[w.rng.IntN(len(gatewayRoutes))]
		// The ref names the request: an upstream's effect names the
		// request that made it.
		body, _ := json.Marshal(effectRequest{Ref: fmt.Sprintf("%s-%d", w.User.ID, seq), Amount: 100*(1000+int64(seq)) + int64(w.ID%100)})
		op := &Op{User: w.User, Key: fmt.Sprintf("op-%d", seq), Kind: OpEffect, Path: r.path, Body: body}
		w.Ops = append(w.Ops, op)
		w.deliver(ctx, op, deadline)
	}
}

type effectRequest struct {
	Ref    string `json:"ref"`
	Amount int64  `json:"amount"`
}

// effectAnswer is the upstreams' 201 body.
type effectAnswer struct {
	ID     string `json:"id"`
	Ref    string `json:"ref"`
	Amount int64  `json:"amount"`
}

// upstreamProc is one upstream process. It is not killed: its faults are
// its own (--faults), and it keeps what it received in memory.
type upstreamProc struct {
	name string
	proc *Replica
}

func (u *upstreamProc) URL() string { return u.proc.URL() }

func (u *upstreamProc) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u.URL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("upstream %s: %s %s: %w", u.name, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && out != nil {
		return errNoEffect
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("upstream %s: %s %s: %s", u.name, method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

var errNoEffect = errors.New("no effect under this key")

// exerciseGateway is the gateway phase from start to verdict.
func (m *modeRun) exerciseGateway(ctx context.Context) (*Verdict, error) {
	p, gp := m.Profile, m.Profile.Gateway
	if err := os.MkdirAll(m.logDir, 0o755); err != nil {
		return nil, err
	}
	m.db = "chaos_" + GatewayPhase
	if err := m.createDatabase(ctx); err != nil {
		return nil, err
	}
	if err := m.pg.Prepare(ctx, m.db); err != nil {
		return nil, err
	}
	direct := m.pg.DSN(m.db)
	if _, err := m.command(ctx, m.Gateway, append([]string{"migrate", "--db", direct}, m.pg.MigrateFlags()...)...); err != nil {
		return nil, err
	}
	ups := map[string]*upstreamProc{}
	for i, r := range gatewayRoutes {
		args := []string{"--db", direct, "--name", r.name, "--seed", fmt.Sprint(m.seed + uint64(i)),
			"--slow-delay", gp.SlowDelay.String(), "--faults", map[string]string{"dedup": gp.DedupFaults, "plain": gp.PlainFaults}[r.name]}
		if r.name == "dedup" {
			args = append(args, "--dedup")
		}
		u := &upstreamProc{name: r.name, proc: &Replica{Slot: -1, bin: m.Upstream, args: args, log: filepath.Join(m.logDir, "upstream-"+r.name+".log")}}
		if err := u.proc.StartRetrying(ctx, 30*time.Second); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, u.proc.LogTail(10))
		}
		defer u.proc.Kill()
		ups[r.name] = u
	}
	config := filepath.Join(m.logDir, "gateway.yaml")
	if err := os.WriteFile(config, []byte(gatewayConfig(p, ups["dedup"].URL(), ups["plain"].URL())), 0o644); err != nil {
		return nil, err
	}

	links, err := NewLinks(m.pg.ProxyTarget(), p.Replicas)
	if err != nil {
		return nil, err
	}
	defer links.Close()
	replicas := make([]*Replica, p.Replicas)
	for i := range replicas {
		replicas[i] = NewReplica(i, m.Gateway, m.logDir, []string{"serve", "--config", config, "--addr", "127.0.0.1:0",
			"--db", pgURL(links.Addr(i), m.db)})
	}
	fleet := NewFleet(replicas, m.stats, m.Log)
	life, endLife := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		endLife()
		bg.Wait()
		fleet.StopAll()
	}()
	for _, r := range replicas {
		if err := r.StartRetrying(ctx, 30*time.Second); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, r.LogTail(20))
		}
	}
	bg.Go(func() { fleet.Supervise(life) })
	front, closeFront, err := m.serveBalancer(NewBalancer(replicas, p.UpstreamTimeout, p.BalancerAttempts, m.stats))
	if err != nil {
		return nil, err
	}
	defer closeFront()

	workers := make([]*gatewayWorker, gp.Callers)
	users := make([]*User, gp.Callers)
	for i := range workers {
		secret := make([]byte, 16)
		_, _ = crand.Read(secret)
		users[i] = &User{ID: fmt.Sprintf("gw%d", i), APIKey: hex.EncodeToString(secret)}
		workers[i] = &gatewayWorker{NewWorker(i, users[i], front, p, m.stats, m.seed+uint64(i))}
		defer workers[i].Close()
	}
	stop := time.Now().Add(p.Duration)
	deadline := stop.Add(p.Drain)
	m.logf("%d idem-gateway replicas behind %s, upstreams %s (dedup) and %s, %d callers, faults for %s",
		p.Replicas, front, ups["dedup"].URL(), ups["plain"].URL(), gp.Callers, p.Duration)
	var callers sync.WaitGroup
	for _, w := range workers {
		callers.Go(func() { w.Run(ctx, stop, deadline) })
	}
	faults, endFaults := context.WithDeadline(ctx, stop)
	defer endFaults()
	progress := m.progress(faults)
	(&Injector{Prof: p, Fleet: fleet, Links: links, DB: m.pg, Stats: m.stats, Log: m.Log}).Run(faults, life, m.seed)
	progress()

	if err := links.Heal(); err != nil {
		return nil, err
	}
	for _, u := range ups {
		if err := u.call(ctx, http.MethodPost, "/calm", nil); err != nil {
			return nil, err
		}
	}
	if !fleet.AllUp(60 * time.Second) {
		return nil, errors.New("the gateway replicas did not all come back after the faults")
	}
	m.logf("faults stopped; %d requests so far; waiting for the callers to finish their retries", m.stats.Requests.Load())
	callers.Wait()

	pool, err := pgxpool.New(ctx, direct)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var ops []*Op
	for _, w := range workers {
		ops = append(ops, w.Ops...)
	}
	open, err := awaitFinalRecords(ctx, pool, gp.Quiet)
	if err != nil {
		return nil, err
	}
	// Every answered key is asked again after every fault: a replay.
	var rechecks sync.WaitGroup
	for _, w := range workers {
		rechecks.Go(func() { w.Recheck(ctx) })
	}
	rechecks.Wait()
	st, err := loadGatewayState(ctx, pool, ups)
	if err != nil {
		return nil, err
	}
	st.open = open

	// The operator resolves every unknown outcome with the gateway's own
	// command, from what the upstream says it did; then each is retried.
	res, err := m.resolveUnknown(ctx, direct, ups["plain"], st)
	if err != nil {
		return nil, err
	}
	api := NewClient(front, SDKConfig{Timeout: 10 * time.Second, MaxAttempts: 10, BaseBackoff: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, &Stats{})
	defer api.Close()
	after := map[userKey]*Op{}
	for _, op := range ops {
		if _, ok := res.of[userKey{gatewayScope(op.User), op.Key}]; ok {
			again := &Op{User: op.User, Key: op.Key, Kind: op.Kind, Path: op.Path, Body: op.Body, Scenario: "after-resolve"}
			api.UntilFinal(ctx, again, time.Now().Add(time.Minute), true)
			api.Send(ctx, again) // a second replica, round robin: the resolution is seen there too
			after[userKey{op.User.ID, op.Key}] = again
		}
	}
	final, err := loadGatewayState(ctx, pool, ups)
	if err != nil {
		return nil, err
	}
	m.logf("checking %d keys; %d unknown outcomes resolved (%d answered, %d reopened)", len(ops), len(res.of), res.answered, len(res.of)-res.answered)
	v := &Verdict{Gateway: &GatewayVerdict{}}
	checkGateway(v, ops, st, final, res, after)
	if n := m.stats.DBFaultErrors.Load(); n > 0 {
		v.fail(&v.DBFaults, "%d database disruptions did not complete (see the log above)", n)
		v.DBFaults = int(n)
	}
	return v, nil
}

// awaitFinalRecords waits, up to d, until no key record is unfinished
// (PROCESSING, or FAILED and waiting for a retry), and returns those
// still unfinished then.
func awaitFinalRecords(ctx context.Context, db *pgxpool.Pool, d time.Duration) (map[userKey]string, error) {
	end := time.Now().Add(d)
	for {
		open := map[userKey]string{}
		err := each(ctx, db, `SELECT scope, idempotency_key, status FROM idempotency_keys WHERE status <> 'COMPLETED'`,
			func(r pgx.Rows) error {
				var k userKey
				var s string
				if err := r.Scan(&k.user, &k.key, &s); err != nil {
					return err
				}
				open[k] = s
				return nil
			})
		if err != nil || len(open) == 0 || time.Now().After(end) || ctx.Err() != nil {
			return open, err
		}
		wait(ctx, 200*time.Millisecond)
	}
}

// gatewayScope is the scope the gateway files u's keys under: the
// SHA-256 of its Authorization header (docs/gateway.md).
func gatewayScope(u *User) string {
	sum := sha256.Sum256([]byte("Bearer " + u.APIKey))
	return hex.EncodeToString(sum[:])
}

// forwardedKey is the key the gateway sends upstream for key in scope,
// as docs/gateway.md's runbook gives it to an operator.
func forwardedKey(scope, key string) string {
	sum := sha256.Sum256([]byte("idem-gateway\x00" + scope + "\x00" + key))
	return hex.EncodeToString(sum[:])[:32]
}

// resolutions are what the operator did with the unknown outcomes.
type resolutions struct {
	listed   []userKey          // keys list --state unknown, by scope
	of       map[userKey][]byte // by scope and key: the answer recorded, nil when reopened
	answered int
}

// resolveUnknown lists the unknown outcomes with `idem-gateway keys list`,
// asks the upstream whether it acted on each forwarded key, and resolves
// each with `idem-gateway keys resolve`: the upstream's answer when it
// acted, a reopening when it did not.
func (m *modeRun) resolveUnknown(ctx context.Context, db string, plain *upstreamProc, st *gatewayState) (*resolutions, error) {
	out, err := m.command(ctx, m.Gateway, "keys", "list", "--db", db, "--state", "unknown", "--limit", "1000000")
	if err != nil {
		return nil, err
	}
	res := &resolutions{of: map[userKey][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var k struct{ Scope, Key string }
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			return nil, fmt.Errorf("keys list printed %q: %v", sc.Text(), err)
		}
		res.listed = append(res.listed, userKey{k.Scope, k.Key})
	}
	for _, k := range res.listed {
		var got effectAnswer
		err := plain.call(ctx, http.MethodGet, "/effects?key="+forwardedKey(k.user, k.key), &got)
		args := []string{"keys", "resolve", "--db", db, "--scope", k.user, "--key", k.key, "--reason", "the upstream's GET /effects"}
		switch {
		case errors.Is(err, errNoEffect):
			args = append(args, "--reopen")
			res.of[k] = nil
		case err != nil:
			return nil, err
		default:
			body, _ := json.Marshal(got)
			body = append(body, '\n')
			file := filepath.Join(m.logDir, "answer-"+forwardedKey(k.user, k.key)+".json")
			if err := os.WriteFile(file, body, 0o644); err != nil {
				return nil, err
			}
			res.of[k] = body
			res.answered++
			args = append(args, "--status", "201", "--body-file", file, "--location", "/plain/effects/"+got.ID)
		}
		if _, err := m.command(ctx, m.Gateway, args...); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// command runs a one-shot command of bin and returns its stdout.
func (m *modeRun) command(ctx context.Context, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args[:min(2, len(args))], " "), err, stderr.String())
	}
	return out, nil
}
