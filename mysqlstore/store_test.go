package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"

	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/mysqlstore/mysqltest"
	"github.com/idem-dev/idem/sqlstore"
)

func newStore(t *testing.T) store.Store {
	db, opts := mysqltest.Store(t)
	s, err := mysqlstore.New(db, opts)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, newStore)
}

// TestMigrateAfterCrashBetweenDDLAndVersion forgets the versions of the
// migrations that ALTER the table, as a process that died after MySQL
// committed their DDL but before it recorded them would: migrating again
// records them without running them twice (an ALTER run again fails on
// the column it renamed or the index it added).
func TestMigrateAfterCrashBetweenDDLAndVersion(t *testing.T) {
	db, opts := mysqltest.Store(t)
	ctx := context.Background()
	altering := []int{2, 3, 4, 7, 8, 10}
	q := "DELETE FROM " + sqlstore.MigrationsTable(opts.Table) + " WHERE version IN (2, 3, 4, 7, 8, 10)"
	_, err := db.ExecContext(ctx, q)
	require.NoError(t, err)
	applied, err := mysqlstore.Migrate(ctx, db, opts)
	require.NoError(t, err)
	require.Equal(t, altering, applied)
	applied, err = mysqlstore.Migrate(ctx, db, opts)
	require.NoError(t, err)
	require.Empty(t, applied)
}
