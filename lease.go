package idem

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idem-dev/idem/store"
)

// keepLease renews a leased-mode claim every third of LeaseDuration while
// the handler runs, so a slow but live request keeps its key. It cancels
// the handler's context (through lost):
//   - with store.ErrNotHeld when another attempt has taken the key;
//   - with ErrLeaseExpired when no renewal has succeeded for a whole lease
//     counted from claimedAt (taken before the claim was sent): the store
//     may be unreachable, but the lease has lapsed all the same;
//   - with ErrLeaseMaxLife at MaxLeaseLife after claimedAt: renewal stops,
//     so a hung handler cannot hold its key for ever; the lease runs out
//     and a retry may take the key.
//
// It costs one timer while the handler runs, and a goroutine only while a
// renewal runs: most handlers return before the first renewal is due.
// Its stop ends the renewals.
//
// model/key.pml (MODE_LEASED) models the renewals and the maximum life;
// keep them in step.
func (m *Middleware) keepLease(a store.Attempt, claimedAt time.Time, lost context.CancelCauseFunc) *lease {
	l := &lease{
		m: m, a: a, lost: lost,
		// The lease is good until the last successful renewal's send time
		// plus its length: the database's clock started later, so this
		// errs on the side of giving up early.
		deadline: claimedAt.Add(m.cfg.LeaseDuration),
		maxLife:  claimedAt.Add(m.cfg.MaxLeaseLife),
		next:     time.Now().Add(m.cfg.LeaseDuration / 3),
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(l.untilDue(), l.fire)
	l.mu.Unlock()
	return l
}

// stop ends the renewals, waits for the one running, if any, and returns
// their count and why the hold ended early, if it did (store.ErrNotHeld,
// ErrLeaseExpired, ErrLeaseMaxLife); it may be called more than once, and
// on a nil lease (a hold without one).
func (l *lease) stop() (renewals int, cause error) {
	if l == nil {
		return 0, nil
	}
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	l.running.Wait()
	return l.renewals, l.cause
}

// lease is one claim's renewals (keepLease).
type lease struct {
	m        *Middleware
	a        store.Attempt
	lost     context.CancelCauseFunc
	deadline time.Time // the lease is good until then
	maxLife  time.Time
	next     time.Time // the next renewal is due then
	renewals int       // written by fire, read after running.Wait
	cause    error     // why the hold ended (end); as renewals

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	running sync.WaitGroup // a fire under way; Add only under mu, before stopped
	// ctx is cancelled by stop: it ends a renewal under way. The first
	// fire makes it, so a handler that returns before the first renewal
	// is due costs no context.
	ctx    context.Context
	cancel context.CancelFunc
}

// untilDue is how long until the timer must fire: the next renewal, or
// the maximum life if that comes first.
func (l *lease) untilDue() time.Duration {
	if l.maxLife.Before(l.next) {
		return time.Until(l.maxLife)
	}
	return time.Until(l.next)
}

// fire runs on the timer's goroutine: it ends the hold past its maximum
// life or once the lease has lapsed, else renews and sets the timer again.
func (l *lease) fire() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.running.Add(1)
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancel(context.Background())
	}
	l.mu.Unlock()
	defer l.running.Done()
	if l.ended() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.timer.Reset(l.untilDue())
	}
}

// end ends the hold: it cancels the handler's context with cause.
func (l *lease) end(cause error) {
	l.cause = cause
	l.lost(cause)
}

// ended renews the lease when it is due and reports whether the hold has
// ended (end has been called).
func (l *lease) ended() bool {
	now := time.Now()
	if !now.Before(l.maxLife) {
		l.end(ErrLeaseMaxLife)
		return true
	}
	if now.Before(l.next) {
		return false // woken for the maximum life, which is not yet reached
	}
	// Due renewals missed while one ran are dropped, as a ticker drops
	// ticks.
	for period := l.m.cfg.LeaseDuration / 3; !l.next.After(now); {
		l.next = l.next.Add(period)
	}
	if !now.Before(l.deadline) {
		l.end(ErrLeaseExpired)
		return true
	}
	rctx, rcancel := context.WithDeadline(l.ctx, l.deadline)
	err := l.m.store.Renew(rctx, l.a, l.m.cfg.LeaseDuration)
	rcancel()
	switch {
	case err == nil:
		l.renewals++
		l.deadline = now.Add(l.m.cfg.LeaseDuration)
	case errors.Is(err, store.ErrNotHeld):
		l.end(store.ErrNotHeld)
		return true
	}
	// Other errors: the store is unreachable for now; the next renewal
	// tries again while the lease lasts.
	if !time.Now().Before(l.deadline) {
		l.end(ErrLeaseExpired)
		return true
	}
	return false
}
