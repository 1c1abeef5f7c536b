package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
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

// TestSweepDistributed: on a key table Citus distributes by scope (make
// test-citus) the sweep runs sweepCandidates and a sweepShard per shard
// through the coordinator, which refuses deleteExpired's FOR UPDATE across
// shards; on one PostgreSQL it keeps deleteExpired. Either deletes the
// expired finished records of every user, in batches, and leaves a live
// lease, an unfinished record, an outcome-unknown answer and a live
// record.
func TestSweepDistributed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	_, err := Migrate(ctx, pool)
	require.NoError(t, err)
	if pgtest.Citus() {
		_, err := Distribute(ctx, pool, DistributeConfig{})
		require.NoError(t, err)
	}
	s := New(pool)
	leaves, err := s.targets(ctx)
	require.NoError(t, err)
	require.Len(t, leaves, 1)
	l := leaves[0]
	if pgtest.Citus() {
		require.Equal(t, [3]string{sweepLock, sweepShard, sweepCandidates}, [3]string{l.lock, l.delete, l.candidates}, "Citus distributes the key table")
	} else {
		require.Equal(t, [3]string{sweepLock, deleteExpired, ""}, [3]string{l.lock, l.delete, l.candidates}, "one PostgreSQL")
	}
	{
		// 40 users: 25 expired finished records each, and one of each
		// kind the sweep must leave.
		_, err = pool.Exec(ctx, `
INSERT INTO idempotency_keys (scope, idempotency_key, request_method, request_path, request_hash,
       fingerprint_version, status, fencing_token, claimed_at, lease_expires_at, response_code, response_body,
       recovery_point, created_at, expires_at)
SELECT 'user-' || u, kind || '-' || i, 'POST', '/v1/payments', sha256(i::text::bytea), 1,
       CASE WHEN kind IN ('leased', 'unfinished') THEN 'PROCESSING' ELSE 'COMPLETED' END,
       gen_random_uuid(), now() - interval '2 days',
       CASE kind WHEN 'leased' THEN now() + interval '1 hour' ELSE now() - interval '2 days' END,
       CASE kind WHEN 'leased' THEN NULL WHEN 'unfinished' THEN NULL WHEN 'unknown' THEN 409 ELSE 201 END,
       CASE kind WHEN 'unknown' THEN convert_to('{"type": "`+keytable.OutcomeUnknownType+`"}', 'UTF8') END,
       CASE kind WHEN 'unfinished' THEN 'charged' END,
       now() - interval '2 days',
       CASE kind WHEN 'live' THEN now() + interval '1 day' ELSE now() - interval '1 day' + i * interval '1 second' END
  FROM generate_series(1, 40) AS u,
       LATERAL (SELECT 'expired', i FROM generate_series(1, 25) AS i
                UNION ALL VALUES ('leased', 0), ('unfinished', 0), ('unknown', 0), ('live', 0)) AS k(kind, i)`)
		require.NoError(t, err)
		var deleted []store.KeyRef
		for {
			batch, err := s.deleteExpired(ctx, l, 300)
			require.NoError(t, err)
			deleted = append(deleted, batch...)
			if len(batch) < 300 {
				break
			}
		}
		require.Len(t, deleted, 40*25)
		for _, k := range deleted {
			require.True(t, strings.HasPrefix(k.Key, "expired-"), "swept %v", k)
		}
		var left int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE idempotency_key NOT LIKE 'expired-%'`).Scan(&left))
		require.Equal(t, 40*4, left)
	}
}
