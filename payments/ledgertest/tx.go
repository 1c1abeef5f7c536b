package ledgertest

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
)

// claimKey makes a COMPLETED key record for user in the idem store, as the
// middleware would, retained for ttl.
func claimKey(t *testing.T, h Harness, user, key string, ttl time.Duration) string {
	t.Helper()
	ctx := context.Background()
	hash := sha256.Sum256([]byte(key))
	c := idem.Claim{
		Scope: user, Key: key,
		Fingerprint: idem.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/transactions", Hash: hash[:]},
		Token:       uuid.NewString(), LockFor: time.Minute, TTL: ttl,
	}
	_, inserted, err := h.Store.Insert(ctx, c)
	require.NoError(t, err)
	require.True(t, inserted)
	require.NoError(t, h.Store.Complete(ctx, idem.Lock{Scope: user, Key: key, Token: c.Token},
		idem.Response{StatusCode: 201, Body: []byte("{}")}))
	return key
}

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

	tx, err := h.Store.Begin(ctx, idem.TxOptions{})
	require.NoError(t, err)
	actx := tx.Context(ctx)
	first, err := s.Convert(actx, user, "k", usdEur(100))
	require.NoError(t, err)
	_, err = s.Convert(actx, user, "k", usdEur(200))
	require.ErrorIs(t, err, payments.ErrDuplicateKey)
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

	tx, err = h.Store.Begin(ctx, idem.TxOptions{})
	require.NoError(t, err)
	actx = tx.Context(ctx)
	_, err = s.Convert(actx, user, "k", usdEur(100))
	require.NoError(t, err, "the rolled-back key is free")
	_, err = s.Convert(actx, user, "k", usdEur(200))
	require.ErrorIs(t, err, payments.ErrDuplicateKey)
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

// testReleaseKeys frees keys as the idem sweeper's hook does: inside the
// transaction that deletes their records.
func testReleaseKeys(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	alice, bob := newUser(t, s), newUser(t, s)
	deposit(t, s, alice, "USD", 10000)
	deposit(t, s, bob, "USD", 10000)
	for i, key := range []string{"gone", "kept"} {
		_, err := s.Convert(ctx, alice, key, payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: int64(100 + i)})
		require.NoError(t, err)
		_, err = s.Deposit(ctx, alice, key, payments.DepositRequest{Currency: "USD", Amount: int64(10 + i)})
		require.NoError(t, err)
	}
	_, err := s.Convert(ctx, bob, "gone", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 100})
	require.NoError(t, err)

	deleted := []idem.KeyRef{{Scope: alice, Key: "gone"}, {Scope: alice, Key: "never-used"}, {Scope: "not-a-user", Key: "gone"}}
	if sw, ok := h.Store.(idem.Sweeper); ok {
		// Through the store's sweep, as the sweeper runs it.
		claimKey(t, h, alice, "gone", time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		got, err := sw.DeleteExpired(ctx, 100, s.ReleaseKeys)
		require.NoError(t, err)
		require.Equal(t, []idem.KeyRef{{Scope: alice, Key: "gone"}}, got)
	} else {
		tx, err := h.Store.Begin(ctx, idem.TxOptions{})
		require.NoError(t, err)
		require.NoError(t, s.ReleaseKeys(tx.Context(ctx), deleted))
		require.NoError(t, tx.Commit(ctx))
	}
	require.NoError(t, s.ReleaseKeys(ctx, nil))

	_, err = s.Convert(ctx, alice, "gone", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 300})
	require.NoError(t, err, "freed")
	_, err = s.Deposit(ctx, alice, "gone", payments.DepositRequest{Currency: "USD", Amount: 2})
	require.NoError(t, err, "freed")
	_, err = s.Convert(ctx, alice, "kept", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 301})
	require.ErrorIs(t, err, payments.ErrDuplicateKey)
	_, err = s.Convert(ctx, bob, "gone", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 302})
	require.ErrorIs(t, err, payments.ErrDuplicateKey, "another user's key stays bound")

	// A hook that fails rolls back with the sweep: nothing is freed.
	tx, err := h.Store.Begin(ctx, idem.TxOptions{})
	require.NoError(t, err)
	require.NoError(t, s.ReleaseKeys(tx.Context(ctx), []idem.KeyRef{{Scope: alice, Key: "kept"}}))
	require.NoError(t, tx.Rollback(ctx))
	_, err = s.Convert(ctx, alice, "kept", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 303})
	require.ErrorIs(t, err, payments.ErrDuplicateKey)
}
