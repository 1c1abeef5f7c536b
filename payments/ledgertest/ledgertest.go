// Package ledgertest is the conformance suite every payments.Ledger passes:
// it drives a real database through payments.Service.
package ledgertest

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/store"
)

// Harness is one Ledger under test, on a migrated, empty database, with
// the idem Store whose key table shares that database.
type Harness struct {
	Ledger payments.Ledger
	Store  store.Store
}

// Run runs the suite. newHarness is called once per test and must return a
// harness of its own.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Users", testUsers},
		{"DepositAndBalances", testDepositAndBalances},
		{"Convert", testConvert},
		{"InsufficientFunds", testInsufficientFunds},
		{"Validation", testValidation},
		{"NotFound", testNotFound},
		{"BalanceLimit", testBalanceLimit},
		{"PayoutReserve", testPayoutReserve},
		{"PayoutCause", testPayoutCause},
		{"Entries", testEntries},
		{"KeyBindsNothing", testKeyBindsNothing},
		{"MinuteNet", testMinuteNet},
		{"DepositMinuteNet", testDepositMinuteNet},
		{"AmbientTransaction", testAmbientTransaction},
		{"ConcurrentOppositeTransfers", testConcurrentOpposite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newHarness(t))
		})
	}
}

func newService(t *testing.T, h Harness, cfg payments.Config) *payments.Service {
	t.Helper()
	s, err := payments.New(h.Ledger, cfg)
	require.NoError(t, err)
	return s
}

func newUser(t *testing.T, s *payments.Service) string {
	t.Helper()
	id, _, err := s.CreateUser(context.Background())
	require.NoError(t, err)
	return id
}

func deposit(t *testing.T, s *payments.Service, user, currency string, amount int64) payments.Deposit {
	t.Helper()
	d, err := s.Deposit(context.Background(), user, "", payments.DepositRequest{Currency: currency, Amount: amount})
	require.NoError(t, err)
	return d
}

// requireBalances checks the user's balances, and that they agree with the
// ledger entries.
func requireBalances(t *testing.T, s *payments.Service, user string, want map[string]int64) {
	t.Helper()
	ctx := context.Background()
	bs, err := s.Balances(ctx, user)
	require.NoError(t, err)
	got := map[string]int64{}
	for _, b := range bs {
		got[b.Currency] = b.Amount
	}
	require.Equal(t, want, got)
	require.NoError(t, s.Reconcile(ctx, user))
}
