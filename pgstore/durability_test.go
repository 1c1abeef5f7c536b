package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// The throwaway test clusters run with fsync and full_page_writes off: the
// check must say so, in one line. On a server run with them on (a
// DATABASE_URL), it must not.
func TestCheckDurability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 2)
	d, err := pgstore.CheckDurability(ctx, pool)
	require.NoError(t, err)
	var fsync, fpw string
	require.NoError(t, pool.QueryRow(ctx, "SHOW fsync").Scan(&fsync))
	require.NoError(t, pool.QueryRow(ctx, "SHOW full_page_writes").Scan(&fpw))
	t.Logf("fsync=%s full_page_writes=%s synchronous_commit=%s standbys=%d: %q", fsync, fpw, d.SyncCommit, d.Standbys, d.Warning())
	require.Equal(t, fsync == "on", d.Fsync)
	require.Equal(t, fpw == "on", d.FullPageWrites)
	require.Equal(t, fsync == "off", strings.Contains(d.Warning(), "fsync is off"))
	require.Equal(t, fpw == "off", strings.Contains(d.Warning(), "full_page_writes is off"))
	require.False(t, strings.Contains(d.Warning(), "\n"))
	require.Equal(t, len(d.Findings) == 0, d.Warning() == "")
}

// synchronous_commit is the pool's sessions' own: a pool that turns it off
// is warned about, whatever the server's default.
func TestCheckDurabilitySyncCommitOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(t, pgtest.Schema(t)))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := pgstore.CheckDurability(ctx, pool)
	if refusedByPgBouncer(t, err, "synchronous_commit") {
		return
	}
	require.NoError(t, err)
	require.Equal(t, "off", d.SyncCommit)
	require.True(t, strings.Contains(d.Warning(), "synchronous_commit is off"), d.Warning())
}

// refusedByPgBouncer reports whether the test runs through PgBouncer in
// transaction pooling, which refuses a session's own setting in the
// connection's startup packet: then err must be that refusal, naming
// param, so a service that sets it in its URL learns at its first
// connection, never later.
func refusedByPgBouncer(t *testing.T, err error, param string) bool {
	t.Helper()
	if !pgtest.PgBouncer() {
		return false
	}
	require.Error(t, err, "PgBouncer passed %s on", param)
	require.Contains(t, err.Error(), "unsupported startup parameter: "+param)
	return true
}
