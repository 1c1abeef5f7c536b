package pgmigrate_test

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgmigrate"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// TestApplyLocksOneSchema migrates two schemas at once, the first one's
// migration held on a table lock: the second one's finishes meanwhile,
// where a lock of the whole server made every schema (tenant, test) queue
// behind the slowest.
func TestApplyLocksOneSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	set := pgmigrate.Set{Name: "test", Table: "test_migrations", Dir: "m",
		FS: fstest.MapFS{"m/001_gate.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS gate (x int); LOCK TABLE gate")}}}
	held := pgtest.Pool(t, 4)
	_, err := held.Exec(ctx, "CREATE TABLE gate (x int)")
	require.NoError(t, err)
	gate, err := held.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = gate.Rollback(ctx) }()
	_, err = gate.Exec(ctx, "LOCK TABLE gate")
	require.NoError(t, err)
	heldDone := make(chan error, 1)
	go func() { _, err := set.Apply(ctx, held); heldDone <- err }()
	require.Eventually(t, func() bool {
		var waiting bool
		err := held.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'gate'::regclass)").Scan(&waiting)
		return err == nil && waiting
	}, time.Minute, 10*time.Millisecond, "the first schema's migration waits on its gate")

	cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(t, pgtest.Schema(t)))
	require.NoError(t, err)
	name := "pgmigrate-" + t.Name()
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	free, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(free.Close)
	freeDone := make(chan error, 1)
	go func() { _, err := set.Apply(ctx, free); freeDone <- err }()
	for done := false; !done; {
		select {
		case err := <-freeDone:
			require.NoError(t, err)
			done = true
		case <-time.After(10 * time.Millisecond):
			var waiting bool
			require.NoError(t, held.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'advisory')",
				name).Scan(&waiting))
			require.False(t, waiting, "the second schema's migration waits on the first one's advisory lock")
		}
	}
	require.NoError(t, gate.Rollback(ctx))
	require.NoError(t, <-heldDone)
}
