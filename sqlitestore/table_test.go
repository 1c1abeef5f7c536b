package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"

	"github.com/idem-dev/idem/sqlitestore"
)

// The key table may have another name, beside the default one.
func TestConformanceOtherTable(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		db := openDB(t)
		ctx := context.Background()
		for _, table := range []string{"request_keys", "idempotency_keys"} {
			applied, err := sqlitestore.MigrateTable(ctx, db, table)
			require.NoError(t, err)
			require.Equal(t, []int{1, 2, 3, 4, 6, 7, 9}, applied, table)
		}
		s, err := sqlitestore.NewWithConfig(db, sqlitestore.Config{Table: "request_keys"})
		require.NoError(t, err)
		return s
	})
}

func TestTableName(t *testing.T) {
	t.Parallel()
	_, err := sqlitestore.NewWithConfig(nil, sqlitestore.Config{Table: "1keys"})
	require.ErrorContains(t, err, "not an identifier")
	script, err := sqlitestore.MigrationSQLTable("request_keys")
	require.NoError(t, err)
	require.Contains(t, script, "CREATE TABLE request_keys")
	require.NotContains(t, script, "TABLE idempotency_keys")
}
