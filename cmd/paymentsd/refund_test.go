package main_test

// A payout the bank rejects is refunded whatever the balance did while it
// was pending: its refund's headroom under the balance limit is reserved
// when it is debited.

import (
	"fmt"
	"github.com/idem-dev/idem/cmd/internal/freeport"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/money"
)

// TestPayoutRefundAtTheLimit fills a balance to the limit, pays out to an
// account the bank rejects while the bank is down (202, debited), tries
// to fill the balance again, then brings the bank back: the retry gets
// the payout failed and refunded, never a stored balance-limit that would
// leave it pending for ever.
func TestPayoutRefundAtTheLimit(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			down := freeAddr(t)
			s := startServer(t, newDB(t, store), payoutArgs(t, "http://"+down, secretFile(t), time.Hour)...)
			u := s.newUser(t)
			fill(t, u, "ARS", payments.DefaultMaxBalance)

			const key = "payout-at-the-limit"
			body := fmt.Sprintf(`{"currency":"ARS","amount":%d,"destination":"reject-acct"}`, money.MaxAmount)
			r := u.post(t, "/v1/payouts", key, body)
			require.Equal(t, http.StatusAccepted, r.status, "the bank is down: %s", r)
			// An amount fill did not use, or the minute net would refuse it.
			refill := u.post(t, "/v1/deposits", newKey(), fmt.Sprintf(`{"currency":"ARS","amount":%d}`, money.MaxAmount-5000))

			startBank(t, filepath.Join(t.TempDir(), "bank.db"), "--addr", down)
			waitFor(t, func() bool {
				var err error
				r, err = try(s, u, http.MethodPost, "/v1/payouts", body, "Idempotency-Key", key)
				return err == nil && r.status != http.StatusAccepted && r.status != http.StatusConflict && r.status != http.StatusServiceUnavailable
			}, "an answer to the payout's retry other than 202, 409 or 503; last: %s", &r)
			require.Equal(t, http.StatusCreated, r.status, "the payout's retry: %s", r)
			require.Equal(t, "failed", r.json(t)["status"])
			require.Equal(t, map[string]int64{"ARS": payments.DefaultMaxBalance}, u.balances(t), "the rejected payout is refunded")
			require.Equal(t, map[string]int64{"ARS": payments.DefaultMaxBalance}, u.entrySums(t))
			require.Equal(t, http.StatusBadRequest, refill.status, "the pending payout's refund keeps its headroom: %s", refill)
			require.Equal(t, "balance-limit", refill.problemType(t))
		})
	}
}

// freeAddr returns a loopback address that nothing listens on, below the
// ephemeral range, so that no other test's listener takes it meanwhile.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := freeport.Loopback()
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// fill deposits into the user's currency balance until it holds total:
// deposits of the largest amount, each a unit smaller than the last so the
// minute net lets them all through, four at a time.
func fill(t *testing.T, u *user, currency string, total int64) {
	t.Helper()
	var amounts []int64
	for left := total; left > 0; {
		a := min(money.MaxAmount-int64(len(amounts)), left)
		amounts = append(amounts, a)
		left -= a
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int64)
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range next {
				r, err := try(u.s, u, http.MethodPost, "/v1/deposits", fmt.Sprintf(`{"currency":%q,"amount":%d}`, currency, a), "Idempotency-Key", newKey())
				if err == nil && r.status != http.StatusCreated {
					err = fmt.Errorf("deposit %d: %s", a, r)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, a := range amounts {
		next <- a
	}
	close(next)
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, map[string]int64{currency: total}, u.balances(t))
}
