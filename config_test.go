package idem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"

	"github.com/idem-dev/idem"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	st := memstore.New() // construction only asks its capabilities

	t.Run("ZeroValueGetsDocumentedDefaults", func(t *testing.T) {
		t.Parallel()
		mw, err := idem.New(st, idem.Config{})
		require.NoError(t, err)
		c := mw.Config()
		require.Equal(t, idem.ModeLeased, c.Mode)
		require.Equal(t, "Idempotency-Key", c.Header)
		require.Equal(t, 30*time.Second, c.LeaseDuration)
		require.Equal(t, 48*time.Hour, c.TTL)
		require.Equal(t, 5*time.Second, c.WaitTimeout)
		require.Equal(t, time.Second, c.RetryAfter)
		require.Equal(t, int64(1<<20), c.MaxRequestBytes)
		require.Equal(t, int64(1<<20), c.MaxResponseBytes)
		require.Equal(t, []string{"Content-Type", "Location", idem.HeaderShouldRetry}, c.ReplayHeaders)
		require.NotNil(t, c.ScopeFunc)
		require.Equal(t, int64(idem.DefaultReplayCacheBytes), c.ReplayCacheBytes)
		require.Equal(t, int64(32<<20), mw.ReplayCache().Max, "the replay cache is on")
	})

	t.Run("NegativeReplayCacheBytesTurnsTheCacheOff", func(t *testing.T) {
		t.Parallel()
		mw, err := idem.New(st, idem.Config{ReplayCacheBytes: -1})
		require.NoError(t, err)
		require.Equal(t, idem.ReplayCacheStats{}, mw.ReplayCache())
		again, err := idem.New(st, mw.Config())
		require.NoError(t, err)
		require.Equal(t, idem.ReplayCacheStats{}, again.ReplayCache(), "the Config in force keeps it off")
	})

	t.Run("ShortProviderKeySecretFailsAtConstruction", func(t *testing.T) {
		t.Parallel()
		_, err := idem.New(st, idem.Config{ProviderKeySecret: []byte("short")})
		require.ErrorContains(t, err, "ProviderKeySecret")
		_, err = idem.New(st, idem.Config{ProviderKeySecret: make([]byte, idem.MinProviderKeySecret)})
		require.NoError(t, err)
	})

	t.Run("SecretHeadersAreNeverReplayed", func(t *testing.T) {
		t.Parallel()
		mw, err := idem.New(st, idem.Config{ReplayHeaders: []string{"set-cookie", "Authorization", "x-trace", "WWW-Authenticate"}})
		require.NoError(t, err)
		require.Equal(t, []string{"X-Trace"}, mw.Config().ReplayHeaders)
	})

	t.Run("InvalidConfigFailsAtConstruction", func(t *testing.T) {
		t.Parallel()
		for name, cfg := range map[string]idem.Config{
			"NegativeTTL":        {TTL: -time.Second},
			"NegativeLock":       {LeaseDuration: -time.Second},
			"TinyLock":           {LeaseDuration: time.Millisecond},
			"NegativeMaxRequest": {MaxRequestBytes: -1},
			"UnknownMode":        {Mode: idem.Mode(7)},
		} {
			_, err := idem.New(st, cfg)
			require.Error(t, err, name)
		}
		_, err := idem.New(nil, idem.Config{})
		require.Error(t, err)
	})

	t.Run("ParseMode", func(t *testing.T) {
		t.Parallel()
		for _, m := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic, idem.ModeAtomicDeferred} {
			got, err := idem.ParseMode(m.String())
			require.NoError(t, err)
			require.Equal(t, m, got)
		}
		require.Equal(t, "atomic-deferred", idem.ModeAtomicDeferred.String())
		_, err := idem.ParseMode("eventual")
		require.ErrorContains(t, err, "unknown mode")
	})

	t.Run("WithModeRefusesWhatIsNoMode", func(t *testing.T) {
		t.Parallel()
		mw, err := idem.New(st, idem.Config{})
		require.NoError(t, err)
		atomic, err := mw.WithMode(idem.ModeAtomicDeferred)
		require.NoError(t, err)
		require.Equal(t, idem.ModeAtomicDeferred, atomic.Config().Mode)
		_, err = mw.WithMode(idem.Mode(7))
		require.ErrorContains(t, err, "unknown mode 7")
	})

	t.Run("WithSetsWhatTheRouteSetsAndKeepsTheRest", func(t *testing.T) {
		t.Parallel()
		mw, err := idem.New(st, idem.Config{TTL: time.Hour, Header: "X-Key"})
		require.NoError(t, err)
		route, err := mw.With(idem.Config{MaxRequestBytes: 16, ExternalEffects: true})
		require.NoError(t, err)
		c := route.Config()
		require.Equal(t, int64(16), c.MaxRequestBytes)
		require.True(t, c.ExternalEffects)
		require.Equal(t, time.Hour, c.TTL, "a zero field keeps the middleware's")
		require.Equal(t, "X-Key", c.Header)
		require.Equal(t, int64(1<<20), mw.Config().MaxRequestBytes, "the middleware is left as it was")
		_, err = mw.With(idem.Config{LeaseDuration: time.Hour})
		require.ErrorContains(t, err, "MaxLeaseLife 5m0s is shorter than LeaseDuration 1h0m0s")
	})

	t.Run("WithRefusesWhatIsTheMiddlewares", func(t *testing.T) {
		t.Parallel()
		mw, err := idem.New(st, idem.Config{})
		require.NoError(t, err)
		for name, route := range map[string]idem.Config{
			"Mode":                {Mode: idem.ModeAtomic},
			"ReplayCacheBytes":    {ReplayCacheBytes: -1},
			"ReplayCacheableFunc": {ReplayCacheableFunc: func(store.Response) bool { return false }},
			"TraceFunc":           {TraceFunc: func(ctx context.Context, _ idem.Op) (context.Context, func(error)) { return ctx, func(error) {} }},
		} {
			_, err := mw.With(route)
			require.ErrorContains(t, err, "a route cannot set "+name+":")
		}
	})

	t.Run("ModeTheStoreCannotServeIsRefused", func(t *testing.T) {
		t.Parallel()
		s := claimFirstStore{memstore.New()}
		_, err := idem.New(s, idem.Config{Mode: idem.ModeAtomicDeferred})
		require.ErrorContains(t, err, "store.Capabilities.DeferredClaim")
		require.False(t, strings.Contains(err.Error(), "\n"), "one line: %q", err)
		mw, err := idem.New(s, idem.Config{Mode: idem.ModeAtomic})
		require.NoError(t, err)
		_, err = mw.WithMode(idem.ModeAtomicDeferred)
		require.ErrorContains(t, err, "store.Capabilities.DeferredClaim")
		leased, err := mw.WithMode(idem.ModeLeased)
		require.NoError(t, err)
		require.Equal(t, idem.ModeLeased, leased.Config().Mode)
	})
}

// claimFirstStore is memstore whose transactions cannot defer a claim, as
// sqlitestore's cannot.
type claimFirstStore struct{ *memstore.Store }

func (s claimFirstStore) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.DeferredClaim = false
	return c
}

func (s claimFirstStore) Begin(ctx context.Context, opts store.TxOptions) (store.Tx, error) {
	tx, err := s.Store.Begin(ctx, opts)
	if err != nil {
		return nil, err
	}
	return claimFirstTx{tx}, nil
}

type claimFirstTx struct{ store.Tx }

func (claimFirstTx) DeferClaim(store.Claim) bool { return false }
