package ledgertest

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
)

// testEntries: the entries a deposit, a transaction and a payout wrote are
// read back as the ledger holds them, by movement and only for their user.
func testEntries(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user, other := newUser(t, s), newUser(t, s)
	d := deposit(t, s, user, "USD", 10000)
	tr, err := s.Convert(ctx, user, "", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 1000})
	require.NoError(t, err)
	p, err := s.DebitPayout(ctx, user, "k", "bank-k", payments.PayoutRequest{Currency: "USD", Amount: 300, Destination: "acct"})
	require.NoError(t, err)

	type line struct {
		Currency string
		Amount   int64
	}
	entries := func(user string, m payments.Movement, id string) []line {
		t.Helper()
		es, err := s.Entries(ctx, user, m, id)
		require.NoError(t, err)
		var ls []line
		for i, e := range es {
			require.Equal(t, user, e.UserID)
			require.False(t, e.CreatedAt.IsZero())
			require.Positive(t, e.ID)
			if i > 0 {
				require.Less(t, es[i-1].ID, e.ID, "in the order written")
			}
			got := map[payments.Movement]string{payments.MovementDeposit: e.DepositID, payments.MovementTransaction: e.TransactionID, payments.MovementPayout: e.PayoutID}
			want := map[payments.Movement]string{payments.MovementDeposit: "", payments.MovementTransaction: "", payments.MovementPayout: ""}
			want[m] = strings.ToLower(id)
			require.Equal(t, want, got)
			ls = append(ls, line{e.Currency, e.Amount})
		}
		return ls
	}
	require.Equal(t, []line{{"USD", 10000}}, entries(user, payments.MovementDeposit, d.ID))
	require.Equal(t, []line{{"USD", -1000}, {"EUR", 920}}, entries(user, payments.MovementTransaction, tr.ID))
	require.Equal(t, []line{{"USD", -300}}, entries(user, payments.MovementPayout, p.ID))
	_, err = s.RefundPayout(ctx, p, "")
	require.NoError(t, err)
	require.Equal(t, []line{{"USD", -300}, {"USD", 300}}, entries(user, payments.MovementPayout, strings.ToUpper(p.ID)))

	require.Empty(t, entries(other, payments.MovementPayout, p.ID), "another user's payout")
	require.Empty(t, entries(user, payments.MovementDeposit, p.ID), "a payout's id is no deposit's")
	require.Empty(t, entries(user, payments.MovementPayout, "not-a-uuid"))
	_, err = s.Entries(ctx, user, "payout_id = payout_id OR true; --", p.ID)
	require.ErrorContains(t, err, "unknown movement")
}
