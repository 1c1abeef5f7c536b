package idem

import (
	"context"
	"errors"
	"sync"
	"time"
)

// keepLease renews a leased-mode lock every third of LockTimeout while the
// handler runs, so a slow but live request keeps its key. When the lock is
// lost to another attempt it calls lost, which cancels the handler. stop
// ends the renewals, waits for the last one, and returns their count.
func (m *Middleware) keepLease(l Lock, lost context.CancelCauseFunc) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		renewals int // written by the goroutine, read after wg.Wait
	)
	wg.Go(func() {
		t := time.NewTicker(m.cfg.LockTimeout / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, m.cfg.LockTimeout/3)
			err := m.store.Renew(rctx, l, m.cfg.LockTimeout)
			rcancel()
			switch {
			case err == nil:
				renewals++
			case errors.Is(err, ErrLockLost):
				lost(ErrLockLost)
				return
			}
			// Other errors: the store is unreachable for now. Keep trying;
			// if the lease expires meanwhile, the fencing token on the
			// completion catches it.
		}
	})
	return func() int {
		cancel()
		wg.Wait()
		return renewals
	}
}
