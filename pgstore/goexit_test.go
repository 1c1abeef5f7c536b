package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

// A handler that ends its goroutine with runtime.Goexit (t.FailNow in a
// handler under test, say) skips everything after its call but deferred
// functions. The middleware still rolls its writes back, stops renewing the
// lease and releases the key, in both modes.
func TestGoexitInHandlerReleasesLeaseAndTx(t *testing.T) {
	t.Parallel()
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run(strings.ToUpper(mode.String()[:1])+mode.String()[1:], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := newStore(t)
			pool := st.Pool()
			_, err := pool.Exec(ctx, `CREATE TABLE payments (ref text)`)
			require.NoError(t, err)
			mw, err := idem.New(st, idem.Config{Mode: mode, LeaseDuration: 300 * time.Millisecond})
			require.NoError(t, err)
			h := mw.Require(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				_, err := pgstore.DB(r.Context(), pool).Exec(r.Context(), `INSERT INTO payments VALUES ('p')`)
				if err == nil {
					runtime.Goexit()
				}
			}))
			var wg sync.WaitGroup
			wg.Go(func() {
				req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
				req.Header.Set("Idempotency-Key", "k1")
				h.ServeHTTP(httptest.NewRecorder(), req.WithContext(idem.WithScope(req.Context(), "alice")))
			})
			wg.Wait()

			require.Zero(t, pool.Stat().AcquiredConns(), "no connection is left in a transaction")
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n))
			require.Zero(t, n, "the handler's write was rolled back")
			rec, err := st.Get(ctx, "alice", "k1")
			if mode == idem.ModeAtomic {
				require.ErrorIs(t, err, store.ErrNotFound, "the claim went with the transaction")
				return
			}
			require.NoError(t, err)
			require.Equal(t, store.StatusFailed, rec.Status, "the key is released for a retry")
			time.Sleep(400 * time.Millisecond) // longer than a renewal period
			again, err := st.Get(ctx, "alice", "k1")
			require.NoError(t, err)
			require.Equal(t, rec.LeaseExpiresAt, again.LeaseExpiresAt, "nothing renews the lease any more")
		})
	}
}
