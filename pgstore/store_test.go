package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// newStore returns a migrated store in a schema of its own. Its pool is
// smaller than the 64 racers of the conformance suite on purpose: they
// contend for connections too, and many tests in parallel stay within the
// server's max_connections.
func newStore(t *testing.T) *pgstore.Store {
	pool := pgtest.Pool(t, 24)
	migrate(t, pool)
	return pgstore.New(pool)
}

// migrate migrates pool's schema, hash-partitioned by user when
// PG_PARTITIONS asks for it (make test-partitioned), distributed by user
// on Citus when PG_CITUS does (make test-citus).
func migrate(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pgstore.MigrateWithConfig(context.Background(), pool, pgstore.MigrateConfig{Partitions: pgtest.Partitions(t)})
	require.NoError(t, err)
	if pgtest.Citus() {
		_, err := pgstore.Distribute(context.Background(), pool, pgstore.DistributeConfig{})
		require.NoError(t, err)
	}
}

// newClaim is a claim of key for user alice with a fresh token, a one
// minute lease and an hour's retention.
func newClaim(key string) store.Claim {
	return store.Claim{Scope: "alice", Key: key, Token: uuid.NewString(), Lease: time.Minute, TTL: time.Hour,
		Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/pay", Hash: make([]byte, 32)}}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	applied, err := pgstore.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, applied)
	applied, err = pgstore.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, applied, "a current schema is left alone")

	script, err := pgstore.MigrationSQL()
	require.NoError(t, err)
	require.Contains(t, script, "CREATE TABLE idempotency_keys")
	// The printed script builds the same schema in an empty one.
	other := pgtest.Pool(t, 4)
	_, err = other.Exec(ctx, script)
	require.NoError(t, err)
	applied, err = pgstore.Migrate(ctx, other)
	require.NoError(t, err)
	require.Empty(t, applied, "the script records what it applied")
}

// The store's SQL works in every pgx query mode a pooler may need, not only
// in pgx's default: the modes that guess parameter types from Go values
// (exec, simple protocol) included.
func TestKeysInEveryQueryMode(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]pgx.QueryExecMode{
		"Exec":           pgx.QueryExecModeExec,
		"SimpleProtocol": pgx.QueryExecModeSimpleProtocol,
		"CacheDescribe":  pgx.QueryExecModeCacheDescribe,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.RunKeys(t, func(t *testing.T) store.Store {
				pool := pgtest.Pool(t, 8)
				migrate(t, pool)
				cfg := pool.Config()
				cfg.ConnConfig.DefaultQueryExecMode = mode
				modal, err := pgxpool.NewWithConfig(context.Background(), cfg)
				require.NoError(t, err)
				t.Cleanup(modal.Close)
				return pgstore.New(modal)
			})
		})
	}
}
