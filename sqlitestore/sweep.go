package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/store"
)

// SweepLockWait bounds how long DeleteExpired waits for the database's
// write lock. SQLite has one writer at a time, so the write lock is the
// sweep lock too: a sweep that cannot have it soon steps aside rather than
// queue in front of requests, and reports store.ErrSweepBusy.
const SweepLockWait = 250 * time.Millisecond

// sweep runs DeleteExpired's batch, one statement, in one transaction
// under the database's write lock. When another writer holds that lock
// for longer than SweepLockWait it runs nothing and returns
// store.ErrSweepBusy: a record an open transaction holds is never waited
// on for long.
func (s *Store) sweep(ctx context.Context, batch func(q engine.Executor, now time.Time) error) error {
	t := s.newTx(SweepLockWait)
	defer t.rollback(ctx) // after a commit it does nothing
	c, err := t.begin(ctx)
	if errors.Is(err, store.ErrWaitTimeout) || errors.Is(err, ErrBusy) {
		return errors.Join(store.ErrSweepBusy, err)
	}
	if err != nil {
		return fmt.Errorf("delete expired: %w", err)
	}
	if err := batch(engine.SQL(c), time.Now()); err != nil {
		return fmt.Errorf("delete expired: %w", t.Explain(err))
	}
	if err := t.commit(ctx); err != nil {
		return fmt.Errorf("delete expired: commit: %w", err)
	}
	return nil
}
