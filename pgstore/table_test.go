package pgstore_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// The key table may have another name: two stores on two tables of one
// schema, each migrated on its own, pass the suite.
func TestConformanceOtherTable(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		pool := pgtest.Pool(t, 24)
		ctx := context.Background()
		for _, table := range []string{"request_keys", "idempotency_keys"} {
			applied, err := pgstore.MigrateTable(ctx, pool, table)
			require.NoError(t, err)
			require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, applied, table)
		}
		s, err := pgstore.NewWithConfig(pool, pgstore.Config{Table: "request_keys"})
		require.NoError(t, err)
		return s
	})
}

func TestTableName(t *testing.T) {
	t.Parallel()
	_, err := pgstore.NewWithConfig(nil, pgstore.Config{Table: "keys; DROP TABLE x"})
	require.ErrorContains(t, err, "not an identifier")
	script, err := pgstore.MigrationSQLTable("request_keys")
	require.NoError(t, err)
	require.Contains(t, script, "CREATE TABLE request_keys")
	require.Contains(t, script, "INSERT INTO request_keys_migrations")
	require.NotContains(t, script, "TABLE idempotency_keys")
}
