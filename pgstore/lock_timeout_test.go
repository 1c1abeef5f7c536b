package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

// The claim bounds its own wait with SET LOCAL lock_timeout and puts the
// session's default back in the same round trip: the handler's statements
// after it, in the same transaction, run with the lock_timeout of the
// connection (here its connection string's), not the claim's, whether the
// claim inserted or found the key taken. (A SET LOCAL the transaction made
// before the claim is not kept: SET LOCAL, unlike set_config, reaches
// Citus's workers, and cannot put back a value it did not read.)
func TestClaimRestoresLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newStore(t)
	cfg := base.Pool().Config()
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "7s"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := pgstore.New(pool)
	taken := "taken-" + uuid.NewString()
	_, inserted, err := st.Insert(ctx, newClaim(taken))
	if refusedByPgBouncer(t, err, "lock_timeout") {
		return
	}
	require.NoError(t, err)
	require.True(t, inserted)

	for _, tc := range []struct {
		name, key    string
		wantInserted bool
	}{{"inserted", "fresh-" + uuid.NewString(), true}, {"conflict", taken, false}} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := st.Begin(ctx, store.TxOptions{MaxWait: 250 * time.Millisecond})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			db := pgstore.DB(tx.Context(ctx), nil)
			rec, inserted, err := tx.Insert(ctx, newClaim(tc.key))
			require.NoError(t, err)
			require.Equal(t, tc.wantInserted, inserted)
			if !inserted {
				require.NotNil(t, rec, "the claim reads the record it conflicted with")
				require.Equal(t, store.StatusProcessing, rec.Status)
			}
			var setting string
			require.NoError(t, db.QueryRow(ctx, "SHOW lock_timeout").Scan(&setting))
			require.Equal(t, "7s", setting, "the handler's statements get the connection's lock_timeout back")
		})
	}
}
