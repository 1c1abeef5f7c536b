package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

func sweptStore(t *testing.T) *pgstore.Store {
	t.Helper()
	pool := pgtest.Pool(t, 4)
	migrate(t, pool)
	return pgstore.New(pool)
}

// addRecords adds n completed records for user, expired when expired says
// so, else live for two days.
func addRecords(t *testing.T, s *pgstore.Store, user string, n int, expired bool) {
	t.Helper()
	expiry := "now() + interval '48 hours'"
	if expired {
		expiry = "now() - interval '1 minute'"
	}
	_, err := s.Pool().Exec(context.Background(), `
INSERT INTO idempotency_keys (scope, idempotency_key, request_method, request_path, request_hash,
       fingerprint_version, status, fencing_token, claimed_at, lease_expires_at, response_code, created_at, expires_at)
SELECT $1, md5(random()::text), 'POST', '/v1/payments', sha256(i::text::bytea), 1, 'COMPLETED',
       gen_random_uuid(), now(), now(), 201, now(), `+expiry+`
  FROM generate_series(1, $2::int) AS i`, user, n)
	require.NoError(t, err)
}

func countRecords(t *testing.T, s *pgstore.Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&n))
	return n
}

func TestNew(t *testing.T) {
	t.Parallel()
	st := pgstore.New(nil) // never used: construction does not touch the st

	t.Run("ZeroValueGetsDocumentedDefaults", func(t *testing.T) {
		t.Parallel()
		sw, err := sweeper.New(st, sweeper.Config{})
		require.NoError(t, err)
		c := sw.Config()
		require.Equal(t, time.Minute, c.Interval)
		require.Equal(t, 1000, c.BatchSize)
		require.Equal(t, 16000, c.MaxBatchSize)
		require.Equal(t, 250*time.Millisecond, c.MaxBatchTime)
		require.Equal(t, 100*time.Millisecond, c.Pause)
	})

	t.Run("NegativePauseMeansNone", func(t *testing.T) {
		t.Parallel()
		sw, err := sweeper.New(st, sweeper.Config{Pause: -1})
		require.NoError(t, err)
		require.Zero(t, sw.Config().Pause)
	})

	t.Run("InvalidConfigFails", func(t *testing.T) {
		t.Parallel()
		_, err := sweeper.New(st, sweeper.Config{Interval: -time.Second, BatchSize: -1, MaxBatchTime: -1})
		require.ErrorContains(t, err, "Interval must be positive")
		require.ErrorContains(t, err, "BatchSize must be positive")
		require.ErrorContains(t, err, "MaxBatchTime must be positive")
		_, err = sweeper.New(st, sweeper.Config{BatchSize: 100, MaxBatchSize: 10})
		require.ErrorContains(t, err, "MaxBatchSize must be at least BatchSize (100), got 10")
		_, err = sweeper.New(nil, sweeper.Config{})
		require.Error(t, err)
	})
}

func TestOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeletesEveryExpiredRecordInPacedBatches", func(t *testing.T) {
		t.Parallel()
		s := sweptStore(t)
		addRecords(t, s, "alice", 25, true)
		addRecords(t, s, "alice", 5, false)
		var batches []int
		sw, err := sweeper.New(s, sweeper.Config{
			BatchSize:    10,
			MaxBatchSize: 10,
			Pause:        50 * time.Millisecond,
			ObserveFunc:  func(b sweeper.Batch) { batches = append(batches, b.Deleted) },
		})
		require.NoError(t, err)
		start := time.Now()
		n, err := sw.Once(ctx)
		require.NoError(t, err)
		require.Equal(t, 25, n)
		require.Equal(t, []int{10, 10, 5}, batches)
		require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "two pauses between three batches")
		require.Equal(t, 5, countRecords(t, s), "live records stay")
	})

	// A backlog doubles the batch while batches come back full and quick;
	// a slow batch halves the next, never below BatchSize.
	for name, tc := range map[string]struct {
		expired int
		maxTime time.Duration
		want    []int
	}{
		"BatchesGrowWithTheBacklog":  {100, time.Hour, []int{10, 20, 40, 30}},
		"SlowBatchesStayAtBatchSize": {35, time.Nanosecond, []int{10, 10, 10, 5}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := sweptStore(t)
			addRecords(t, s, "alice", tc.expired, true)
			var batches []int
			sw, err := sweeper.New(s, sweeper.Config{
				BatchSize: 10, MaxBatchSize: 40, MaxBatchTime: tc.maxTime, Pause: -1,
				ObserveFunc: func(b sweeper.Batch) { batches = append(batches, b.Deleted) },
			})
			require.NoError(t, err)
			n, err := sw.Once(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.expired, n)
			require.Equal(t, tc.want, batches)
		})
	}

	t.Run("BusyWhileAnotherProcessSweeps", func(t *testing.T) {
		t.Parallel()
		s := sweptStore(t)
		addRecords(t, s, "alice", 3, true)
		// The other process is inside a batch: its transaction holds the
		// sweep lock (pgstore's, taken as pgstore takes it), of every
		// partition when the table is partitioned.
		other, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = other.Rollback(ctx) }()
		var locked bool
		require.NoError(t, other.QueryRow(ctx, `
SELECT bool_and(pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext(oid::text))) FROM pg_class
 WHERE oid = 'idempotency_keys'::regclass OR oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'idempotency_keys'::regclass)`).Scan(&locked))
		require.True(t, locked)
		sw, err := sweeper.New(s, sweeper.Config{})
		require.NoError(t, err)
		n, err := sw.Once(ctx)
		require.ErrorIs(t, err, store.ErrSweepBusy)
		require.Zero(t, n)
		require.NoError(t, other.Rollback(ctx))
		n, err = sw.Once(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n, "the lock holder deleted nothing")
	})
}

func TestRun(t *testing.T) {
	t.Parallel()
	s := sweptStore(t)
	sw, err := sweeper.New(s, sweeper.Config{Interval: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()

	addRecords(t, s, "alice", 3, true)
	addRecords(t, s, "bob", 2, false)
	left := func() bool { // runs on Eventually's goroutine: no require
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&n)
		return err == nil && n == 2
	}
	require.Eventually(t, left, time.Minute, 20*time.Millisecond,
		"a later round sweeps records that expired after Run started")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context was canceled")
	}
}
