package ledgertest

import (
	"context"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"

	"github.com/idem-dev/idem/payments"
)

// testAmbientTransaction runs the service inside a store transaction, as
// the middleware does: a business error undoes only its own writes and
// leaves the transaction usable; the transaction's outcome decides all.
func testAmbientTransaction(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 1000)
	usdEur := func(amount int64) payments.TransferRequest {
		return payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: amount}
	}

	tx, err := h.Store.Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	actx := tx.Context(ctx)
	first, err := s.Convert(actx, user, "k", usdEur(100))
	require.NoError(t, err)
	_, err = s.Convert(actx, user, "other", usdEur(100))
	require.ErrorIs(t, err, payments.ErrDuplicateTransfer)
	var ife *payments.InsufficientFundsError
	_, err = s.Convert(actx, user, "", usdEur(5000))
	require.ErrorAs(t, err, &ife)
	require.Equal(t, int64(900), ife.Balance, "the transaction sees its own writes")
	_, err = s.Deposit(actx, user, "", payments.DepositRequest{Currency: "USD", Amount: 5})
	require.NoError(t, err)
	got, err := s.GetTransaction(actx, user, first.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	require.NoError(t, tx.Rollback(ctx))
	requireBalances(t, s, user, map[string]int64{"USD": 1000})
	_, err = s.GetTransaction(ctx, user, first.ID)
	require.ErrorIs(t, err, payments.ErrNotFound, "rolled back with the transaction")

	tx, err = h.Store.Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	actx = tx.Context(ctx)
	_, err = s.Convert(actx, user, "k", usdEur(100))
	require.NoError(t, err, "the rolled-back transaction is gone: the minute net does not see it")
	_, err = s.Convert(actx, user, "other", usdEur(100))
	require.ErrorIs(t, err, payments.ErrDuplicateTransfer)
	require.NoError(t, tx.Commit(ctx), "the transaction survived the net firing")
	requireBalances(t, s, user, map[string]int64{"USD": 900, "EUR": 92})
}

// testConcurrentOpposite runs transfers between two balances in both
// directions at once. Balances are locked in a fixed order, so none
// deadlocks and every one succeeds.
func testConcurrentOpposite(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 1_000_000)
	deposit(t, s, user, "EUR", 1_000_000)

	const n = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards want and errs
		want = map[string]int64{"USD": 1_000_000, "EUR": 1_000_000}
		errs []error
	)
	for i := range 2 * n {
		wg.Go(func() {
			req := payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: int64(100 + i)}
			if i%2 == 1 {
				req.SourceCurrency, req.TargetCurrency = "EUR", "USD"
			}
			tr, err := s.Convert(ctx, user, "", req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			want[tr.SourceCurrency] -= tr.Amount
			want[tr.TargetCurrency] += tr.ConvertedAmount
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	requireBalances(t, s, user, want)
}
