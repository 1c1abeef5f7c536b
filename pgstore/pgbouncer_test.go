package pgstore_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// The whole suite runs through a real PgBouncer with `make test-pgbouncer`
// (pgtest then asks for the same mode in the connection string). This runs
// the key operations and the sweep on pools set up by PgBouncerConfig,
// whichever server DATABASE_URL names.
func TestPgBouncerConfig(t *testing.T) {
	t.Parallel()
	newStore := func(t *testing.T) store.Store {
		cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(t, pgtest.Schema(t)))
		require.NoError(t, err)
		pgstore.PgBouncerConfig(cfg)
		require.Equal(t, pgx.QueryExecModeCacheDescribe, cfg.ConnConfig.DefaultQueryExecMode)
		cfg.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		migrate(t, pool)
		return pgstore.New(pool)
	}
	t.Run("Keys", func(t *testing.T) { t.Parallel(); storetest.RunKeys(t, newStore) })
	t.Run("Sweep", func(t *testing.T) { t.Parallel(); storetest.RunSweep(t, newStore) })
}
