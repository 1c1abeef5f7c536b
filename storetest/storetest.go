// Package storetest is the conformance suite every idem.Store runs: each
// state transition of a record, expiry, fencing, both lock modes through the
// real middleware over real HTTP, and 64-way races on one key.
//
// A store's own tests call Run with a function that returns a store on an
// empty key table of its own:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idem.Store { return newStore(t) })
//	}
package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
)

// NewStoreFunc returns a store on an empty key table that no other test
// uses. It registers its own cleanup.
type NewStoreFunc func(t *testing.T) idem.Store

// Run runs the whole suite.
func Run(t *testing.T, newStore NewStoreFunc) {
	t.Run("Keys", func(t *testing.T) { t.Parallel(); RunKeys(t, newStore) })
	t.Run("Tx", func(t *testing.T) { t.Parallel(); RunTx(t, newStore) })
	t.Run("Race", func(t *testing.T) { t.Parallel(); RunRace(t, newStore) })
	t.Run("Sweep", func(t *testing.T) { t.Parallel(); RunSweep(t, newStore) })
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		t.Run("Middleware"+modeName(mode), func(t *testing.T) { t.Parallel(); RunMiddleware(t, newStore, mode) })
	}
}

func modeName(m idem.Mode) string {
	if m == idem.ModeAtomic {
		return "Atomic"
	}
	return "Leased"
}

// claim builds a claim for scope and key over a body, with a fresh token.
func claim(scope, key, body string, lockFor, ttl time.Duration) idem.Claim {
	h := sha256.Sum256([]byte(body))
	return idem.Claim{
		Scope: scope,
		Key:   key,
		Fingerprint: idem.Fingerprint{
			Version: idem.FingerprintVersion,
			Method:  "POST",
			Path:    "/v1/payments?x=1",
			Hash:    h[:],
		},
		Token:   uuid.NewString(),
		LockFor: lockFor,
		TTL:     ttl,
	}
}

func lockOf(c idem.Claim) idem.Lock { return idem.Lock{Scope: c.Scope, Key: c.Key, Token: c.Token} }

// newKey returns a key no other test uses.
func newKey() string { return "key-" + uuid.NewString() }
