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
//   - with store.ErrLeaseLost when another attempt has taken the key;
//   - with ErrLeaseExpired when no renewal has succeeded for a whole lease
//     counted from claimedAt (taken before the claim was sent): the store
//     may be unreachable, but the lease has lapsed all the same;
//   - with ErrLeaseMaxLife at MaxLeaseLife after claimedAt: renewal stops,
//     so a hung handler cannot hold its key for ever; the lease runs out
//     and a retry may take the key.
//
// stop ends the renewals, waits for the last one, and returns their count;
// it may be called more than once.
//
// model/key.pml (MODE_LEASED) models the renewals and the maximum life;
// keep them in step.
func (m *Middleware) keepLease(a store.Attempt, claimedAt time.Time, lost context.CancelCauseFunc) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		renewals int // written by the goroutine, read after wg.Wait
	)
	wg.Go(func() {
		// The lease is good until the last successful renewal's send time
		// plus its length: the database's clock started later, so this
		// errs on the side of giving up early.
		deadline := claimedAt.Add(m.cfg.LeaseDuration)
		maxLife := time.NewTimer(time.Until(claimedAt.Add(m.cfg.MaxLeaseLife)))
		defer maxLife.Stop()
		t := time.NewTicker(m.cfg.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-maxLife.C:
				lost(ErrLeaseMaxLife)
				return
			case <-t.C:
			}
			sent := time.Now()
			if !sent.Before(deadline) {
				lost(ErrLeaseExpired)
				return
			}
			rctx, rcancel := context.WithDeadline(ctx, deadline)
			err := m.store.Renew(rctx, a, m.cfg.LeaseDuration)
			rcancel()
			switch {
			case err == nil:
				renewals++
				deadline = sent.Add(m.cfg.LeaseDuration)
			case errors.Is(err, store.ErrLeaseLost):
				lost(store.ErrLeaseLost)
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
