package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// Racers is how many goroutines contend for one key.
const Racers = 64

// RunRace sets Racers goroutines on one key at once: exactly one claims it,
// and exactly one re-acquires it after a failure.
func RunRace(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()

	t.Run("InsertOneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := newKey()
		var winners atomic.Int32
		race(t, func() error {
			_, inserted, err := s.Insert(ctx, claim("alice", key, "body", long, ttl))
			if inserted {
				winners.Add(1)
			}
			return err
		})
		require.Equal(t, int32(1), winners.Load())
	})

	t.Run("ReacquireOneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		c := claim("alice", newKey(), "body", long, ttl)
		_, _, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c.Attempt()))
		var winners atomic.Int32
		race(t, func() error {
			won, err := s.Reacquire(ctx, claim("alice", c.Key, "body", long, ttl), c.Token)
			if won {
				winners.Add(1)
			}
			return err
		})
		require.Equal(t, int32(1), winners.Load())
	})

	t.Run("InsertInTxOneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := newKey()
		var winners atomic.Int32
		race(t, func() error {
			tx, err := s.Begin(ctx, store.TxOptions{})
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			c := claim("alice", key, "body", long, ttl)
			_, inserted, err := tx.Insert(ctx, c)
			if err != nil || !inserted {
				return err
			}
			winners.Add(1)
			if err := tx.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201}); err != nil {
				return err
			}
			return tx.Commit(ctx)
		})
		require.Equal(t, int32(1), winners.Load())
	})
}

// race runs fn in Racers goroutines released at once and fails on any
// error. A racer whose bounded wait ran out (store.ErrWaitTimeout, which a
// client sees as 409 with Retry-After) tries again, as that client would:
// a store that serialises writers (SQLite) may keep 63 racers waiting
// longer than its bound on a loaded machine.
func race(t *testing.T, fn func() error) {
	t.Helper()
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		errs  = make(chan error, Racers)
	)
	for range Racers {
		wg.Go(func() {
			<-start
			err := fn()
			for errors.Is(err, store.ErrWaitTimeout) {
				err = fn()
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
