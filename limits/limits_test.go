package limits_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/limits"
)

func TestLimiter(t *testing.T) {
	t.Parallel()
	t.Run("ZeroConfigIsTheDefaults", func(t *testing.T) {
		t.Parallel()
		l, err := limits.New(limits.Config{})
		require.NoError(t, err)
		c := l.Config()
		require.Equal(t, limits.DefaultBodyTimeout, c.BodyTimeout)
		require.Equal(t, int64(limits.DefaultBodyMemory), c.BodyMemory)
		require.Equal(t, limits.DefaultRequestsPerScope, c.RequestsPerScope)
	})
	t.Run("NegativeBoundFailsAtConstruction", func(t *testing.T) {
		t.Parallel()
		_, err := limits.New(limits.Config{BodyMemory: -1})
		require.Error(t, err)
	})
	t.Run("EnterBoundsEachScope", func(t *testing.T) {
		t.Parallel()
		l, err := limits.New(limits.Config{RequestsPerScope: 2})
		require.NoError(t, err)
		leave1, ok := l.Enter("alice")
		require.True(t, ok)
		_, ok = l.Enter("alice")
		require.True(t, ok)
		_, ok = l.Enter("alice")
		require.False(t, ok, "a third of alice's")
		_, ok = l.Enter("bob")
		require.True(t, ok, "another scope")
		leave1()
		_, ok = l.Enter("alice")
		require.True(t, ok, "one left")
	})
	t.Run("ReserveBoundsTheBytes", func(t *testing.T) {
		t.Parallel()
		l, err := limits.New(limits.Config{BodyMemory: 100})
		require.NoError(t, err)
		release, ok := l.Reserve(60)
		require.True(t, ok)
		_, ok = l.Reserve(41)
		require.False(t, ok)
		release()
		_, ok = l.Reserve(100)
		require.True(t, ok)
	})
}
