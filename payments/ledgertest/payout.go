package ledgertest

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/money"
)

// testPayoutReserve: a pending payout keeps the headroom of its refund
// under the balance limit, so a refund is never refused, and a settled
// payout frees it.
func testPayoutReserve(t *testing.T, h Harness) {
	ctx := context.Background()
	const limit = 2 * money.MaxAmount
	s := newService(t, h, payments.Config{MaxBalance: limit})
	user := newUser(t, s)
	deposit(t, s, user, "USD", money.MaxAmount)
	deposit(t, s, user, "USD", money.MaxAmount-1)
	deposit(t, s, user, "USD", 1)

	payout := func(key string) payments.Payout {
		t.Helper()
		p, err := s.DebitPayout(ctx, user, key, "bank-"+key, payments.PayoutRequest{Currency: "USD", Amount: money.MaxAmount, Destination: "acct"})
		require.NoError(t, err)
		return p
	}
	refunded := payout("refunded")
	var ble *payments.BalanceLimitError
	_, err := s.Deposit(ctx, user, "", payments.DepositRequest{Currency: "USD", Amount: 2})
	require.ErrorAs(t, err, &ble, "the pending payout's refund keeps its headroom")
	require.Equal(t, payments.BalanceLimitError{Currency: "USD", Balance: money.MaxAmount, Reserved: money.MaxAmount, Credit: 2, Limit: limit}, *ble)
	_, err = s.RefundPayout(ctx, refunded, "")
	require.NoError(t, err)
	requireBalances(t, s, user, map[string]int64{"USD": limit})

	settled := payout("settled")
	_, err = s.SettlePayout(ctx, settled, "transfer-1")
	require.NoError(t, err)
	deposit(t, s, user, "USD", 2)
	requireBalances(t, s, user, map[string]int64{"USD": money.MaxAmount + 2})
}

// testPayoutCause: why a pending payout's bank outcome is unknown is
// recorded on it, replaced by the next cause, and cleared when the payout
// is paid or refunded; a payout no longer pending takes none.
func testPayoutCause(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 1000)
	requireCause := func(p payments.Payout, want string) {
		t.Helper()
		got, err := s.GetPayout(ctx, user, p.ID)
		require.NoError(t, err)
		require.Equal(t, want, got.BankOutcomeCause, "by id")
		got, err = s.PayoutByBankKey(ctx, user, p.BankKey)
		require.NoError(t, err)
		require.Equal(t, want, got.BankOutcomeCause, "by bank key")
	}
	for _, end := range []string{"Settled", "Refunded"} {
		t.Run(end, func(t *testing.T) {
			p, err := s.DebitPayout(ctx, user, end, "bank-"+end, payments.PayoutRequest{Currency: "USD", Amount: 100, Destination: "acct"})
			require.NoError(t, err)
			requireCause(p, "")
			require.NoError(t, s.MarkPayoutUnknown(ctx, p, "timeout"))
			requireCause(p, "timeout")
			require.NoError(t, s.MarkPayoutUnknown(ctx, p, "reset"))
			require.NoError(t, s.MarkPayoutUnknown(ctx, p, "reset"), "the same cause again")
			requireCause(p, "reset")
			if end == "Settled" {
				p, err = s.SettlePayout(ctx, p, "transfer-1")
			} else {
				p, err = s.RefundPayout(ctx, p, "transfer-2")
			}
			require.NoError(t, err)
			require.Empty(t, p.BankOutcomeCause)
			requireCause(p, "")
			require.Error(t, s.MarkPayoutUnknown(ctx, p, "timeout"), "a payout no longer pending")
			requireCause(p, "")
		})
	}
}
