package limits_test

import (
	"net/http"
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
	t.Run("AdmitRefusesPastEitherBound", func(t *testing.T) {
		t.Parallel()
		l, err := limits.New(limits.Config{BodyMemory: 100, RequestsPerScope: 1})
		require.NoError(t, err)
		done, refusal := l.Admit("alice", 60)
		require.True(t, refusal == nil, "the first of alice's")
		_, refusal = l.Admit("alice", 1)
		require.True(t, refusal != nil && refusal.StatusCode == http.StatusTooManyRequests, "a second of alice's")
		_, refusal = l.Admit("bob", 41)
		require.True(t, refusal != nil && refusal.StatusCode == http.StatusServiceUnavailable, "past the bytes")
		require.Equal(t, "1", refusal.Header.Get("Retry-After"))
		require.Equal(t, "application/problem+json", refusal.Header.Get("Content-Type"))
		require.Contains(t, string(refusal.Body), limits.ProblemOverloaded)
		done()
		done, refusal = l.Admit("bob", 100)
		require.True(t, refusal == nil, "everything given back")
		done()
	})
}
