package idem

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// unusedStore is a store.Store that is never called: construction alone is
// under test, which only asks its capabilities.
type unusedStore struct{ store.Store }

func (unusedStore) Capabilities() store.Capabilities { return store.Capabilities{} }

// Without a TraceFunc the middleware holds the caller's store itself: no
// wrapper, no indirection, no allocation per operation.
func TestNilTraceFuncCallsStoreDirectly(t *testing.T) {
	t.Parallel()
	var s store.Store = unusedStore{}
	m, err := New(s, Config{})
	require.NoError(t, err)
	require.Equal(t, s, m.store)

	m, err = New(s, Config{TraceFunc: TraceAll(nil, nil)})
	require.NoError(t, err)
	require.Equal(t, s, m.store, "TraceAll of nothing is nil")

	m, err = New(s, Config{TraceFunc: func(ctx context.Context, _ Op) (context.Context, func(error)) {
		return ctx, func(error) {}
	}})
	require.NoError(t, err)
	require.IsType(t, &tracedStore{}, m.store)
}
