package bench

import (
	"context"
	"time"
)

// sweep is the sweep run: what deleting the expired part of a large key
// table does to paymentsd's latency while it serves load.
//
// It preloads the key table with SweepRows COMPLETED records, SweepExpired
// of them past retention, starts paymentsd in atomic-deferred mode with its
// own sweeper off (--sweep-interval 0), and sends an open-loop load of
// SweepRate requests a second, half fresh and half replays of live
// preloaded keys. After Warmup and a baseline of SweepBaseline it runs
// `paymentsd keys sweep` (the same binary, default batch size and pause)
// in windows of SweepWindow alternating with windows where the process is
// stopped (SIGSTOP, then SIGCONT), until it exits, so that whatever else
// the machine does falls on both kinds of window alike. It then checks the
// key table in SQL, writes sweep.md and sweep.json, and fails on any
// unexpected answer, expired record left, live record lost, or a deleted
// count other than SweepExpired.
func (r *runner) sweep(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	db, machine, err := r.open(ctx, "bench_sweep")
	if err != nil {
		return nil, err
	}
	defer r.dispose(ctx, db)
	cfg.Logf("preloading %d keys, %d of them expired", cfg.SweepRows, cfg.SweepExpired)
	took, err := preloadKeys(ctx, db, cfg.SweepRows, cfg.SweepExpired, cfg.Logf)
	if err != nil {
		return nil, err
	}
	size, err := keyTableSize(ctx, db)
	if err != nil {
		return nil, err
	}
	cfg.Logf("preloaded in %v; the key table and its indexes take %s", took.Round(time.Second), size)
	// The replay cache off, so that every replay reads the key table the
	// sweep deletes from.
	srv, err := r.startPaymentsd(ctx, "paymentsd-atomic-deferred", "atomic-deferred", db, "--sweep-interval", "0", "--replay-cache-mb", "0")
	if err != nil {
		return nil, err
	}
	load := &openLoop{rate: cfg.SweepRate, srv: srv, db: db, wl: r.wl, lo: cfg.SweepExpired, hi: cfg.SweepRows}
	clock := &phaseClock{load: load, pool: db.pool}
	machine.LoadBefore = loadAvg()
	stop := make(chan struct{})
	answers := make(chan []answer, 1)
	go func() { answers <- load.run(ctx, stop) }()
	deleted, err := r.sweepPhases(ctx, db, clock)
	close(stop)
	got := <-answers
	if err != nil {
		return nil, err
	}
	machine.LoadAfter = loadAvg()
	cfg.Logf("checking the key table")
	check, err := checkSweep(ctx, db, got, cfg.SweepRows, cfg.SweepExpired)
	if err != nil {
		return nil, err
	}
	res := newSweepResult(cfg, got, clock, deleted, check)
	rep := &Report{Machine: machine, Sweep: res, Settings: sweepSettings(cfg, took, size)}
	if err := rep.write(cfg.Out, ""); err != nil {
		return nil, err
	}
	return rep, res.failures(cfg.SweepExpired)
}

// sweepPhases moves the load through its phases, warm-up, baseline and
// the sweep's windows, and returns how many records the sweep deleted.
func (r *runner) sweepPhases(ctx context.Context, db *database, clock *phaseClock) (int, error) {
	cfg := r.cfg
	if err := clock.hold(ctx, phaseWarmup, cfg.Warmup); err != nil {
		return 0, err
	}
	cfg.Logf("baseline: %v at %d requests a second, no sweep", cfg.SweepBaseline, cfg.SweepRate)
	if err := clock.hold(ctx, phaseBaseline, cfg.SweepBaseline); err != nil {
		return 0, err
	}
	cfg.Logf("sweeping in %v windows, alternating with windows without it", cfg.SweepWindow)
	n, err := sweepInWindows(ctx, cfg.Paymentsd, db, r.work, cfg.SweepWindow, clock)
	if err != nil {
		return 0, err
	}
	cfg.Logf("the sweep deleted %d records in %v of sweeping (%v wall clock)", n,
		clock.time[phaseOn].Round(time.Millisecond), (clock.time[phaseOn] + clock.time[phaseOff]).Round(time.Millisecond))
	return n, nil
}
