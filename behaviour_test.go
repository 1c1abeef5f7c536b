package idem_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

func newMemstore(*testing.T) store.Store { return memstore.New() }

// The middleware's behaviour, in every configuration, on the in-memory
// reference store: the request path tests itself without a database. The
// SQL stores run the same half of storetest, and the store contract too.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	storetest.RunBehaviour(t, newMemstore)
}

// The same, with a TraceFunc, so that every store operation goes through
// the tracing wrapper: the wrapper changes nothing the middleware does,
// every operation it reports it ends, and none of them fails.
func TestBehaviourTraced(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		open  int
		seen  = map[string]bool{}
		trace = func(ctx context.Context, op idem.Op) (context.Context, func(error)) {
			mu.Lock()
			defer mu.Unlock()
			open++
			seen[string(op)] = true
			return ctx, func(err error) {
				mu.Lock()
				defer mu.Unlock()
				open--
				seen[string(op)+" "+idem.TraceResult(err)] = true
			}
		}
	)
	t.Run("Configs", func(t *testing.T) {
		for _, c := range storetest.MiddlewareConfigs() {
			c.Config.TraceFunc = trace
			t.Run("Middleware"+c.Name, func(t *testing.T) { t.Parallel(); storetest.RunMiddleware(t, newMemstore, c.Config) })
			t.Run("Do"+c.Name, func(t *testing.T) { t.Parallel(); storetest.RunDo(t, newMemstore, c.Config) })
		}
	})
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, open, "every operation reported was ended")
	for op := range seen {
		require.False(t, strings.HasSuffix(op, " error"), "%s: the store never fails here", op)
	}
}
