package engine

import "github.com/idem-dev/idem/store"

// DeferredClaim is an atomic-mode claim held back until the completion
// (store.Capabilities.DeferredClaim): what a store's transaction keeps of
// it, for this engine's Tx and for pgstore's, which sends it in its own
// batch.
type DeferredClaim struct {
	c   *store.Claim // nil: no claim deferred
	ran bool
	err error
}

// Defer holds c back, unless the transaction has ended or holds a claim
// back already.
func (d *DeferredClaim) Defer(c store.Claim, ended bool) bool {
	if ended || d.c != nil {
		return false
	}
	d.c = &c
	return true
}

// Claim is the claim held back, nil for none.
func (d *DeferredClaim) Claim() *store.Claim { return d.c }

// Pending reports whether a claim held back awaits the completion.
func (d *DeferredClaim) Pending() bool { return d.c != nil && !d.ran }

// Ran records that the claim ran, with its error, and returns err.
func (d *DeferredClaim) Ran(err error) error {
	d.ran, d.err = true, err
	return err
}

// Result reports whether the claim has run, and its error.
func (d *DeferredClaim) Result() (ran bool, err error) { return d.ran, d.err }
