package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// partitionedStore is a store on a key table hash-partitioned by user into
// 16 partitions, and 32 users' records on it: 20 expired each for the
// even users, 20 live for the odd ones, so that every partition's first
// pages hold records, expired in some, live in others.
func partitionedStore(t *testing.T) *pgstore.Store {
	t.Helper()
	pool := pgtest.Pool(t, 8)
	_, err := pgstore.MigrateWithConfig(context.Background(), pool, pgstore.MigrateConfig{Partitions: 16})
	require.NoError(t, err)
	s := pgstore.New(pool)
	for i := range 32 {
		addRecords(t, s, fmt.Sprintf("user-%d", i), 20, i%2 == 0)
	}
	var partitions int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_inherits WHERE inhparent = 'idempotency_keys'::regclass`).Scan(&partitions))
	require.Equal(t, 16, partitions)
	return s
}

// liveAndExpired counts the records live and past their expiry.
func liveAndExpired(t *testing.T, s *pgstore.Store) (live, expired int) {
	t.Helper()
	require.NoError(t, s.Pool().QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE expires_at > now()), count(*) FILTER (WHERE expires_at <= now()) FROM idempotency_keys`).
		Scan(&live, &expired))
	return live, expired
}

// A ctid is an address within one table: the same ctid names a row in
// every partition. A sweep that deleted by ctid on the partitioned table
// deleted the live keys of other users, whose records sat at the addresses
// of expired ones in their own partitions.
func TestSweepPartitioned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeletesExpiredRecordsOnly", func(t *testing.T) {
		t.Parallel()
		s := partitionedStore(t)
		sw, err := sweeper.New(s, sweeper.Config{BatchSize: 100, Pause: -1})
		require.NoError(t, err)
		n, err := sw.Once(ctx)
		require.NoError(t, err)
		live, expired := liveAndExpired(t, s)
		require.Equal(t, 320, live, "no live key of another user is deleted")
		require.Zero(t, expired)
		require.Equal(t, 320, n)
	})

	t.Run("LimitHolds", func(t *testing.T) {
		t.Parallel()
		s := partitionedStore(t)
		for _, limit := range []int{1, 7, 50} {
			deleted, err := s.DeleteExpired(ctx, limit)
			require.NoError(t, err)
			require.Len(t, deleted, limit)
		}
		// What one user's partition leaves of the limit goes to the others.
		deleted, err := s.DeleteExpired(ctx, 1000)
		require.NoError(t, err)
		require.Len(t, deleted, 320-58)
	})

	t.Run("OneSweepAtATimePerPartition", func(t *testing.T) {
		t.Parallel()
		s := partitionedStore(t)
		// Another replica is sweeping the partition of user-0.
		var partition string
		require.NoError(t, s.Pool().QueryRow(ctx,
			`SELECT tableoid::regclass::text FROM idempotency_keys WHERE scope = 'user-0' LIMIT 1`).Scan(&partition))
		other, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = other.Rollback(ctx) }()
		var locked bool
		require.NoError(t, other.QueryRow(ctx,
			`SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext($1::regclass::oid::text))`, partition).Scan(&locked))
		require.True(t, locked)

		deleted, err := s.DeleteExpired(ctx, 1000)
		require.NoError(t, err)
		var left []string
		rows, err := s.Pool().Query(ctx, `SELECT DISTINCT scope FROM idempotency_keys WHERE expires_at <= now()`)
		require.NoError(t, err)
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Contains(t, left, "user-0", "the partition another replica sweeps is left to it")
		require.Less(t, len(left), 16, "the other partitions are swept")
		require.NotEmpty(t, deleted)

		require.NoError(t, other.Rollback(ctx))
		_, err = s.DeleteExpired(ctx, 1000)
		require.NoError(t, err)
		_, expired := liveAndExpired(t, s)
		require.Zero(t, expired)
	})

	t.Run("BusyWhenEveryPartitionIs", func(t *testing.T) {
		t.Parallel()
		s := partitionedStore(t)
		other, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = other.Rollback(ctx) }()
		_, err = other.Exec(ctx, `SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext(inhrelid::text))
		                            FROM pg_inherits WHERE inhparent = 'idempotency_keys'::regclass`)
		require.NoError(t, err)
		_, err = s.DeleteExpired(ctx, 1000)
		require.ErrorIs(t, err, store.ErrSweepBusy)
	})
}
