package adaptertest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/idem-dev/idem/store"
)

// ErrDown is what a DownStore's operations fail with once it is down.
var ErrDown = errors.New("the database is unreachable")

// DownStore is a store behind a switch: once Down is called, Begin, Get
// and Insert fail with ErrDown, as a store's do when its database is
// unreachable. An adapter's answers to a store failure do not depend on
// the store (each store passes storetest on its own database), so its
// tests put the in-memory reference store behind it.
type DownStore struct {
	store.Store
	down atomic.Bool
}

// NewDownStore returns s behind the switch, up.
func NewDownStore(s store.Store) *DownStore { return &DownStore{Store: s} }

// Down takes the store down for good.
func (s *DownStore) Down() { s.down.Store(true) }

func (s *DownStore) Begin(ctx context.Context, opts store.TxOptions) (store.Tx, error) {
	if s.down.Load() {
		return nil, ErrDown
	}
	return s.Store.Begin(ctx, opts)
}

func (s *DownStore) Get(ctx context.Context, scope, key string) (*store.Record, error) {
	if s.down.Load() {
		return nil, ErrDown
	}
	return s.Store.Get(ctx, scope, key)
}

func (s *DownStore) Insert(ctx context.Context, c store.Claim) (*store.Record, bool, error) {
	if s.down.Load() {
		return nil, false, ErrDown
	}
	return s.Store.Insert(ctx, c)
}
