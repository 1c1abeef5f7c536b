package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Fleet is the paymentsd replicas. It restarts any replica that dies, and
// tells apart the deaths it caused from the others.
type Fleet struct {
	Replicas []*Replica
	held     []atomic.Bool // the fault injector owns this replica: do not restart it
	stats    *Stats
	log      io.Writer
}

// NewFleet wraps replicas.
func NewFleet(replicas []*Replica, stats *Stats, log io.Writer) *Fleet {
	return &Fleet{Replicas: replicas, held: make([]atomic.Bool, len(replicas)), stats: stats, log: log}
}

// Supervise restarts replicas that exited on their own, until ctx ends.
func (f *Fleet) Supervise(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, r := range f.Replicas {
			if f.held[i].Load() || r.Alive() {
				continue
			}
			if !f.held[i].CompareAndSwap(false, true) {
				continue
			}
			if r.Started() {
				// It had been running: it died without our SIGKILL.
				f.stats.UnplannedExits.Add(1)
				fmt.Fprintf(f.log, "chaos: replica %d exited on its own; restarting it\n%s\n", i, r.LogTail(5))
				r.Kill() // reap
			}
			if err := r.StartRetrying(ctx, 30*time.Second); err != nil && ctx.Err() == nil {
				fmt.Fprintf(f.log, "chaos: replica %d will not start: %v\n", i, err)
			}
			f.held[i].Store(false)
		}
	}
}

// KillAndRestart SIGKILLs replica i and starts it again after pause. It
// reports false when the replica was already held or down.
func (f *Fleet) KillAndRestart(ctx context.Context, i int, pause time.Duration) bool {
	if !f.held[i].CompareAndSwap(false, true) {
		return false
	}
	defer f.held[i].Store(false)
	if !f.Replicas[i].Kill() {
		return false
	}
	f.stats.Kills.Add(1)
	time.Sleep(pause)
	if err := f.Replicas[i].StartRetrying(ctx, 30*time.Second); err != nil && ctx.Err() == nil {
		fmt.Fprintf(f.log, "chaos: replica %d will not restart: %v\n", i, err)
	}
	return true
}

// Hold keeps the fault injector and the supervisor off replica i until
// Release; it reports false when someone else holds it.
func (f *Fleet) Hold(i int) bool { return f.held[i].CompareAndSwap(false, true) }

// Release ends a Hold.
func (f *Fleet) Release(i int) { f.held[i].Store(false) }

// Pause freezes replica i with SIGSTOP for d (or until ctx ends), as a
// long GC pause or an overloaded host would: its requests stall with their
// keys held, their leases run out, and it wakes up to finish them late.
func (f *Fleet) Pause(ctx context.Context, i int, d time.Duration) bool {
	if !f.held[i].CompareAndSwap(false, true) {
		return false
	}
	defer f.held[i].Store(false)
	if !f.Replicas[i].Signal(syscall.SIGSTOP) {
		return false
	}
	f.stats.Pauses.Add(1)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	f.Replicas[i].Signal(syscall.SIGCONT)
	return true
}

// AllUp waits until every replica is running, up to d.
func (f *Fleet) AllUp(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		up := true
		for i, r := range f.Replicas {
			up = up && r.Alive() && !f.held[i].Load()
		}
		if up {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// StopAll kills every replica; the supervisor must be stopped first.
func (f *Fleet) StopAll() {
	for _, r := range f.Replicas {
		r.Kill()
	}
}

// Injector brings the faults while traffic flows.
type Injector struct {
	Prof  Profile
	Fleet *Fleet
	Links *Links // nil: no link faults
	DB    Database
	Stats *Stats
	Log   io.Writer
	rng   *rand.Rand
	mu    sync.Mutex // guards rng
}

func (in *Injector) between(s Span) time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	if s.Max <= s.Min {
		return s.Min
	}
	return s.Min + time.Duration(in.rng.Int64N(int64(s.Max-s.Min)))
}

func (in *Injector) intN(n int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.IntN(n)
}

// Run injects faults until ctx ends, then waits for the ones in progress:
// each lifts itself as soon as ctx ends. Replicas it killed restart under
// life, which outlives ctx.
func (in *Injector) Run(ctx, life context.Context, seed uint64) {
	in.rng = rand.New(rand.NewPCG(seed, 0xc4a05))
	var wg sync.WaitGroup
	wg.Go(func() { in.kills(ctx, life, &wg) })
	wg.Go(func() { in.connFaults(ctx, &wg) })
	wg.Go(func() { in.dbRestarts(ctx) })
	wg.Wait()
}

func (in *Injector) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (in *Injector) kills(ctx, life context.Context, wg *sync.WaitGroup) {
	for in.sleep(ctx, in.between(in.Prof.KillEvery)) {
		// Keep one replica up: a fleet with none answers nothing, which
		// tests the balancer, not idempotency.
		alive := 0
		for _, r := range in.Fleet.Replicas {
			if r.Alive() {
				alive++
			}
		}
		if alive < 2 {
			continue
		}
		i := in.intN(len(in.Fleet.Replicas))
		if in.intN(3) == 0 {
			// One time in three, a freeze longer than the lock timeout
			// instead of a kill.
			d := in.between(Span{in.Prof.LeaseDuration * 5 / 4, in.Prof.LeaseDuration * 2})
			wg.Go(func() { in.Fleet.Pause(ctx, i, d) })
			continue
		}
		pause := in.between(in.Prof.RestartAfter)
		wg.Go(func() { in.Fleet.KillAndRestart(life, i, pause) })
	}
}

func (in *Injector) connFaults(ctx context.Context, wg *sync.WaitGroup) {
	if in.Links == nil {
		return
	}
	for in.sleep(ctx, in.between(in.Prof.FaultEvery)) {
		i := in.intN(len(in.Fleet.Replicas))
		k := in.intN(len(FaultKinds))
		d := in.between(in.Prof.FaultFor)
		wg.Go(func() {
			applied, err := in.Links.Inject(ctx, i, FaultKinds[k], d)
			if applied {
				in.Stats.ConnFaults[k].Add(1)
			}
			if err != nil {
				fmt.Fprintf(in.Log, "chaos: %s fault on replica %d: %v\n", FaultKinds[k], i, err)
			}
		})
	}
}

// dbRestarts disrupts PostgreSQL DBRestarts times, evenly spaced, the
// first a little before the middle of a short run: fast restarts of a
// cluster, SIGKILLs of a formation's primary. A disruption that outlasts
// the spacing delays the next one, and none starts after the faults end.
func (in *Injector) dbRestarts(ctx context.Context) {
	n := in.Prof.DBRestarts
	if n <= 0 {
		return
	}
	every := in.Prof.Duration / time.Duration(n+1)
	start := time.Now()
	next := start
	for range n {
		next = next.Add(every)
		if !in.sleep(ctx, max(time.Until(next), 0)) {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		at := time.Since(start)
		d, err := in.DB.Disrupt(rctx)
		cancel()
		if d.Took > 0 {
			d.At = at
			in.Stats.addOutage(d)
			what := d.What
			if d.Detail != "" {
				what += " (" + d.Detail + ")"
			}
			fmt.Fprintf(in.Log, "chaos: PostgreSQL disrupted%s; over and writes accepted after %s\n", strings.TrimRight(" "+what, " "), d.Took.Round(time.Millisecond))
		}
		if err != nil {
			fmt.Fprintf(in.Log, "chaos: disrupt PostgreSQL: %v\n", err)
			in.Stats.DBFaultErrors.Add(1)
		}
	}
}
