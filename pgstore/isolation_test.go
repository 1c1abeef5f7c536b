package pgstore_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

// The store's own auto-committed writes run at READ COMMITTED whatever the
// database's default: under REPEATABLE READ, a claim that loses a race
// would otherwise fail with a serialization error (503) instead of seeing
// the winner (409 or a replay).
func TestLeasedClaimUnderRepeatableReadDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newStore(t)
	cfg := base.Pool().Config()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	cfg.MaxConns = 64
	rrPool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer rrPool.Close()
	st := pgstore.New(rrPool)

	var failures []error
	for round := range 20 {
		key := "rr-" + uuid.NewString()
		h := sha256.Sum256([]byte("body"))
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for range 32 {
			wg.Go(func() {
				<-start
				c := store.Claim{
					Scope: "alice", Key: key, Token: uuid.NewString(),
					Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/p", Hash: h[:]},
					Lease:       time.Minute, TTL: time.Hour,
				}
				if _, _, err := st.Insert(ctx, c); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(failures) > 0 {
			t.Logf("round %d: %d of 32 claims failed; first: %v", round, len(failures), failures[0])
			break
		}
	}
	require.Empty(t, failures, "a claim that loses a race must return the winner's record, not an error (the middleware answers 503)")
}
