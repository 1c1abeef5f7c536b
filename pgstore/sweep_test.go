package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
)

func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("BatchUsesExpiresAtIndex", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Pool(t, 2)
		_, err := Migrate(ctx, pool)
		require.NoError(t, err)
		// 20,000 records, the oldest 1% expired, as a steady state looks.
		_, err = pool.Exec(ctx, `
INSERT INTO idempotency_keys (scope, idempotency_key, request_method, request_path, request_hash,
       fingerprint_version, status, fencing_token, claimed_at, lease_expires_at, response_code, created_at, expires_at)
SELECT 'user-' || i % 100, md5(i::text), 'POST', '/v1/payments', sha256(i::text::bytea), 1, 'COMPLETED',
       gen_random_uuid(), t, t, 201, t, t + interval '48 hours'
  FROM generate_series(1, 20000) AS i,
       LATERAL (SELECT now() - interval '48 hours 30 minutes' + i * interval '8 seconds') AS c(t)`)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `ANALYZE idempotency_keys`)
		require.NoError(t, err)

		rows, err := pool.Query(ctx, "EXPLAIN "+deleteExpired, 1000, time.Time{})
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		require.Contains(t, plan, "Tid Scan", plan)
		require.Contains(t, plan, "idempotency_keys_expires_at_idx", plan)
		require.Contains(t, plan, "(expires_at >= ", plan) // in the Index Cond: a batch starts where the last one ended
		require.NotContains(t, plan, "Seq Scan", plan)
	})

	t.Run("OneSweepAtATimePerTable", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Pool(t, 4)
		_, err := Migrate(ctx, pool)
		require.NoError(t, err)
		s := New(pool)

		// Another replica is in the middle of a batch.
		other, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = other.Rollback(ctx) }()
		var locked bool
		require.NoError(t, other.QueryRow(ctx, sweepLock).Scan(&locked))
		require.True(t, locked)

		_, err = s.DeleteExpired(ctx, 10)
		require.ErrorIs(t, err, store.ErrSweepBusy)

		// The lock belongs to this schema's table: another schema sweeps.
		elsewhere := pgtest.Pool(t, 2)
		_, err = Migrate(ctx, elsewhere)
		require.NoError(t, err)
		_, err = New(elsewhere).DeleteExpired(ctx, 10)
		require.NoError(t, err)

		require.NoError(t, other.Rollback(ctx))
		_, err = s.DeleteExpired(ctx, 10)
		require.NoError(t, err, "the lock is gone with the other batch's transaction")
	})

	t.Run("LimitMustBePositive", func(t *testing.T) {
		t.Parallel()
		_, err := New(nil).DeleteExpired(ctx, 0)
		require.ErrorContains(t, err, "limit must be positive")
	})
}
