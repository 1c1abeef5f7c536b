package idem

import "errors"

// Causes a leased-mode handler's context is cancelled with (see
// context.Cause), besides store.ErrNotHeld when another attempt took the
// key over.
var (
	// ErrLeaseExpired: no renewal succeeded for a whole lease (the store
	// was unreachable); another attempt may hold the key by now.
	ErrLeaseExpired = errors.New("idem: lease expired without a successful renewal")
	// ErrLeaseMaxLife: the handler ran past Config.MaxLeaseLife. Renewal
	// stops, so the key is free for a retry once the lease runs out, and
	// whatever the handler answers afterwards is not stored.
	ErrLeaseMaxLife = errors.New("idem: the handler ran past the lease's maximum life")
)
