package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// RunUnsupported checks that the store's Capabilities do not lie in the
// other direction: every operation of a capability it does not report
// returns store.ErrUnsupported (wrapped), and a transaction of a store
// that cannot defer a claim holds none back. The tests of the capabilities
// it reports check that they work.
func RunUnsupported(t *testing.T, newStore NewStoreFunc) {
	ctx := context.Background()
	s := newStore(t)
	caps := s.Capabilities()
	c := claim("alice", newKey(), "body", time.Minute, time.Hour)
	a := c.Attempt()
	tx, err := s.Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()

	if !caps.DeferredClaim {
		require.False(t, tx.DeferClaim(c), "a store without DeferredClaim holds no claim back")
	}
	for _, g := range []struct {
		has bool
		ops map[string]func() error
	}{
		{caps.RecoveryPoints, map[string]func() error{
			"Progress":    func() error { _, err := s.Progress(ctx, a); return err },
			"Advance":     func() error { return s.Advance(ctx, a, "debited", nil) },
			"Tx.Progress": func() error { _, err := tx.Progress(ctx, a); return err },
			"Tx.Advance":  func() error { return tx.Advance(ctx, a, "debited", nil) },
		}},
		{caps.Unfinished, map[string]func() error{
			"FindUnfinished":   func() error { _, err := s.FindUnfinished(ctx, 1); return err },
			"ResumeUnfinished": func() error { _, err := s.ResumeUnfinished(ctx, c, c.Token); return err },
		}},
		{caps.Sweep, map[string]func() error{
			"DeleteExpired": func() error { _, err := s.DeleteExpired(ctx, 1); return err },
		}},
		{caps.Resolve, map[string]func() error{
			"ListCompleted":   func() error { _, err := s.ListCompleted(ctx, 409, store.KeyRef{}, 1); return err },
			"Release":         func() error { return s.Release(ctx, a) },
			"ReplaceResponse": func() error { return s.ReplaceResponse(ctx, a, store.Response{StatusCode: 201}) },
		}},
		{caps.Search, map[string]func() error{
			"ListKeys":     func() error { _, err := s.ListKeys(ctx, store.KeyQuery{}); return err },
			"CountKeys":    func() error { _, err := s.CountKeys(ctx); return err },
			"ProviderKeys": func() error { _, err := s.ProviderKeys(ctx, c.Scope, c.Key); return err },
		}},
		{caps.AuditLog, map[string]func() error{
			"AppendAudit": func() error {
				return s.AppendAudit(ctx, store.AuditEntry{Actor: "ann", Action: "release", Reason: "INC-1"})
			},
			"ListAudit":  func() error { _, err := s.ListAudit(ctx, store.KeyRef{}, 1); return err },
			"BeginAudit": func() error { _, err := s.BeginAudit(ctx); return err },
		}},
	} {
		if g.has {
			continue
		}
		for name, op := range g.ops {
			require.ErrorIs(t, op(), store.ErrUnsupported, "%s of a capability the store does not report", name)
		}
	}
}
