package idem

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrLeaseExpired is the cause a leased-mode handler's context is
// cancelled with when no renewal has succeeded for a whole lease: another
// attempt may hold the key by now.
var ErrLeaseExpired = errors.New("idem: lease expired without a successful renewal")

// keepLease renews a leased-mode lock every third of LockTimeout while the
// handler runs, so a slow but live request keeps its key. The handler's
// context is cancelled (through lost) when another attempt has taken the
// lock, and also when no renewal has succeeded for a whole lease counted
// from claimedAt (taken before the claim was sent): the store may be
// unreachable, but the lock has lapsed all the same, and a retry elsewhere
// may be running. stop ends the renewals, waits for the last one, and
// returns their count; it may be called more than once.
func (m *Middleware) keepLease(l Lock, claimedAt time.Time, lost context.CancelCauseFunc) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		renewals int // written by the goroutine, read after wg.Wait
	)
	wg.Go(func() {
		// The lease is good until the last successful renewal's send time
		// plus its length: the database's clock started later, so this
		// errs on the side of giving up early.
		deadline := claimedAt.Add(m.cfg.LockTimeout)
		t := time.NewTicker(m.cfg.LockTimeout / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sent := time.Now()
			if !sent.Before(deadline) {
				lost(ErrLeaseExpired)
				return
			}
			rctx, rcancel := context.WithDeadline(ctx, deadline)
			err := m.store.Renew(rctx, l, m.cfg.LockTimeout)
			rcancel()
			switch {
			case err == nil:
				renewals++
				deadline = sent.Add(m.cfg.LockTimeout)
			case errors.Is(err, ErrLockLost):
				lost(ErrLockLost)
				return
			}
			// Other errors: the store is unreachable for now; the next
			// tick tries again while the lease lasts.
			if !time.Now().Before(deadline) {
				lost(ErrLeaseExpired)
				return
			}
		}
	})
	return sync.OnceValue(func() int {
		cancel()
		wg.Wait()
		return renewals
	})
}
