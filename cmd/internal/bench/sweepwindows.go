package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// phase is the part of the sweep run a request falls due in.
type phase int32

const (
	phaseWarmup   phase = iota // not reported
	phaseBaseline              // before the sweep process starts
	phaseOff                   // a window where the sweep process is stopped
	phaseOn                    // a window where it runs
	phaseAfter                 // after it exited, until the load stops: not reported
	phases                     // how many there are
)

// phaseClock moves the open-loop load from window to window and adds up,
// per phase, its time, its windows and the WAL the whole server wrote in
// it.
type phaseClock struct {
	load    *openLoop
	pool    *pgxpool.Pool
	kinds   []phase // the phase of each window so far, in order
	cur     phase
	since   time.Time
	walAt   float64 // the WAL position when cur began
	time    [phases]time.Duration
	wal     [phases]float64 // bytes
	windows [phases]int
}

// hold enters p and stays in it for d.
func (c *phaseClock) hold(ctx context.Context, p phase, d time.Duration) error {
	if err := c.enter(ctx, p); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// enter ends the current window and starts one of phase p.
func (c *phaseClock) enter(ctx context.Context, p phase) error {
	ctr, err := readCounters(ctx, c.pool, false)
	if err != nil {
		return fmt.Errorf("WAL position: %w", err)
	}
	now := time.Now()
	if !c.since.IsZero() {
		c.time[c.cur] += now.Sub(c.since)
		c.wal[c.cur] += ctr.WALBytes - c.walAt
	}
	c.kinds = append(c.kinds, p)
	c.load.window.Store(int32(len(c.kinds) - 1))
	c.cur, c.since, c.walAt = p, now, ctr.WALBytes
	c.windows[p]++
	return nil
}

// sweepInWindows runs `bin keys sweep` on db in windows of w, stopped for
// the windows between them, until it exits, and returns how many records
// it deleted. The process's start-up counts in its first window.
func sweepInWindows(ctx context.Context, bin string, db *database, dir string, w time.Duration, clock *phaseClock) (int, error) {
	if err := clock.enter(ctx, phaseOn); err != nil {
		return 0, err
	}
	p, err := startSweep(bin, db, dir)
	if err != nil {
		return 0, err
	}
	exited := false
	defer func() {
		if !exited {
			p.kill()
		}
	}()
	tick := time.NewTicker(w)
	defer tick.Stop()
	for {
		select {
		case waitErr := <-p.done:
			exited = true
			if err := clock.enter(ctx, phaseAfter); err != nil {
				return 0, err
			}
			return p.deleted(waitErr)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
		next, sig := phaseOff, syscall.SIGSTOP
		if clock.cur == phaseOff {
			next, sig = phaseOn, syscall.SIGCONT
		}
		if err := p.signal(sig); err != nil {
			return 0, err
		}
		if err := clock.enter(ctx, next); err != nil {
			return 0, err
		}
	}
}
