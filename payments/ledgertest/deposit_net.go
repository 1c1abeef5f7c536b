package ledgertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
)

// testDepositMinuteNet: the same deposit sent at once under several keys
// (and without one) credits once; the others meet the deposits' minute
// net, and nothing of theirs is kept.
func testDepositMinuteNet(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	alice, bob := newUser(t, s), newUser(t, s)
	waitOutMinuteEnd()
	req := payments.DepositRequest{Currency: "USD", Amount: 700}

	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards made and errs
		made int
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			key := ""
			if i > 0 {
				key = string(rune('a' + i))
			}
			_, err := s.Deposit(ctx, alice, key, req)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				made++
				return
			}
			errs = append(errs, err)
		})
	}
	wg.Wait()
	require.Equal(t, 1, made, "%v", errs)
	for _, err := range errs {
		require.ErrorIs(t, err, payments.ErrDuplicateDeposit)
		require.ErrorIs(t, err, payments.ErrDuplicate)
	}
	requireBalances(t, s, alice, map[string]int64{"USD": 700})

	// Another amount, currency or user is another deposit.
	for _, r := range []payments.DepositRequest{{Currency: "USD", Amount: 701}, {Currency: "EUR", Amount: 700}} {
		_, err := s.Deposit(ctx, alice, "", r)
		require.NoError(t, err, "%+v", r)
	}
	_, err := s.Deposit(ctx, bob, "", req)
	require.NoError(t, err)
	requireBalances(t, s, alice, map[string]int64{"USD": 1401, "EUR": 700})
}

// waitOutMinuteEnd returns at once unless the current UTC minute has less
// than ten seconds left, and else when the next one has begun, so a test's
// movements fall in one minute.
func waitOutMinuteEnd() {
	now := time.Now()
	if next := now.Truncate(time.Minute).Add(time.Minute); next.Sub(now) < 10*time.Second {
		time.Sleep(next.Sub(now) + 50*time.Millisecond)
	}
}
