// Package storetest is the conformance suite of store.Store, in two
// halves. RunContract is the store contract, what every Store must do:
// each state transition of a record, expiry, fencing, transactions,
// 64-way races on one key, each capability the store reports
// (store.Capabilities), and that every operation of a capability it does
// not report returns store.ErrUnsupported. RunBehaviour
// is the middleware's behaviour on the store: every way of holding a key
// through the real middleware, over real HTTP and through Middleware.Do,
// recovery points and package completer. Run runs both.
//
// A store's own tests call Run with a function that returns a store on an
// empty key table of its own:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
//	}
//
// The core runs both halves on memstore: the contract in package memstore,
// the behaviour in package idem, where the lease's renewals and maximum
// life are tested under testing/synctest, with a fake clock, rather than
// here with real leases.
//
// RunConsumer, given a business table besides (a [Business]), drives
// package consumer on the store as a broker adapter does.
package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// NewStoreFunc returns a store on an empty key table that no other test
// uses. It registers its own cleanup.
type NewStoreFunc func(t *testing.T) store.Store

// Run runs the whole suite: the store contract and the middleware's
// behaviour on the store.
func Run(t *testing.T, newStore NewStoreFunc) {
	RunContract(t, newStore)
	RunBehaviour(t, newStore)
}

// RunContract checks what every Store must do, through the store's own
// operations.
func RunContract(t *testing.T, newStore NewStoreFunc) {
	t.Run("Keys", func(t *testing.T) { t.Parallel(); RunKeys(t, newStore) })
	t.Run("Tx", func(t *testing.T) { t.Parallel(); RunTx(t, newStore) })
	t.Run("KeyLock", func(t *testing.T) { t.Parallel(); RunKeyLock(t, newStore) })
	t.Run("Race", func(t *testing.T) { t.Parallel(); RunRace(t, newStore) })
	t.Run("Sweep", func(t *testing.T) { t.Parallel(); RunSweep(t, newStore) })
	t.Run("Resolve", func(t *testing.T) { t.Parallel(); RunResolve(t, newStore) })
	t.Run("Operator", func(t *testing.T) { t.Parallel(); RunOperator(t, newStore) })
	t.Run("CompletedAt", func(t *testing.T) { t.Parallel(); RunCompletedAt(t, newStore) })
	t.Run("Phase", func(t *testing.T) { t.Parallel(); RunAdvancer(t, newStore) })
	t.Run("Unsupported", func(t *testing.T) { t.Parallel(); RunUnsupported(t, newStore) })
}

// RunBehaviour checks what the middleware does on the store: every
// configuration of MiddlewareConfigs over HTTP and through Do, and
// recovery points with package completer.
func RunBehaviour(t *testing.T, newStore NewStoreFunc) {
	t.Run("PhaseFlow", func(t *testing.T) { t.Parallel(); RunPhaseFlow(t, newStore) })
	for _, c := range MiddlewareConfigs() {
		t.Run("Middleware"+c.Name, func(t *testing.T) { t.Parallel(); RunMiddleware(t, newStore, c.Config) })
		t.Run("Do"+c.Name, func(t *testing.T) { t.Parallel(); RunDo(t, newStore, c.Config) })
	}
}

// MiddlewareConfig is one configuration RunMiddleware is run in.
type MiddlewareConfig struct {
	Name   string
	Config idem.Config
}

// MiddlewareConfigs are the configurations Run drives the middleware in:
// both modes; atomic mode with the claim deferred to the completion (on a
// store that cannot defer it, idem.New refuses the mode and its tests are
// skipped); each without the
// replay cache, so reading every key first, and leased and deferred with
// it (the default), which claims without reading first.
func MiddlewareConfigs() []MiddlewareConfig {
	const cache = 1 << 20
	return []MiddlewareConfig{
		{"Leased", idem.Config{Mode: idem.ModeLeased, ReplayCacheBytes: -1}},
		{"Atomic", idem.Config{Mode: idem.ModeAtomic, ReplayCacheBytes: -1}},
		{"AtomicDeferredClaim", idem.Config{Mode: idem.ModeAtomicDeferred, ReplayCacheBytes: -1}},
		{"LeasedCached", idem.Config{Mode: idem.ModeLeased, ReplayCacheBytes: cache}},
		{"AtomicDeferredClaimCached", idem.Config{Mode: idem.ModeAtomicDeferred, ReplayCacheBytes: cache}},
	}
}

// skipWithout skips t when s does not report the capability name (has).
func skipWithout(t *testing.T, s store.Store, has bool, name string) {
	t.Helper()
	if !has {
		t.Skipf("%T does not report store.Capabilities.%s", s, name)
	}
}

// skipUnservedMode skips t when the store cannot serve cfg's mode, once it
// has checked that idem.New refuses the mode rather than serving another.
func skipUnservedMode(t *testing.T, newStore NewStoreFunc, cfg idem.Config) {
	t.Helper()
	s := newStore(t)
	if cfg.Mode != idem.ModeAtomicDeferred || s.Capabilities().DeferredClaim {
		return
	}
	_, err := idem.New(s, cfg)
	require.Error(t, err, "New refuses a mode the store cannot serve")
	t.Skipf("%T cannot defer a claim (store.Capabilities.DeferredClaim)", s)
}

// claim builds a claim for scope and key over a body, with a fresh token.
func claim(scope, key, body string, lease, ttl time.Duration) store.Claim {
	h := sha256.Sum256([]byte(body))
	return store.Claim{
		Scope: scope,
		Key:   key,
		Fingerprint: store.Fingerprint{
			Version: idem.FingerprintVersion,
			Method:  "POST",
			Path:    "/v1/payments?x=1",
			Hash:    h[:],
		},
		Token: uuid.NewString(),
		Lease: lease,
		TTL:   ttl,
	}
}

// newKey returns a key no other test uses.
func newKey() string { return "key-" + uuid.NewString() }
