package main_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

func TestContract(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t))

	first := b.post(t, "payout-1", body(1250, "acct-1"))
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	require.False(t, first.replayed())
	tr := first.transfer(t)
	require.NotEmpty(t, tr.ID)
	require.NotEmpty(t, tr.CreatedAt)
	require.Equal(t, transfer{ID: tr.ID, IdempotencyKey: "payout-1", Amount: 1250, Currency: "USD",
		Destination: "acct-1", Status: "settled", CreatedAt: tr.CreatedAt}, tr)

	t.Run("RetryGetsTheSameAnswer", func(t *testing.T) {
		// The same request spelt differently is the same request.
		again := b.post(t, "payout-1", `{ "destination": "acct-1", "currency": "USD", "amount": 1250 }`)
		require.Equal(t, http.StatusCreated, again.status)
		require.True(t, again.replayed())
		require.Equal(t, string(first.body), string(again.body))
	})
	t.Run("KeyWithAnotherBodyIs422", func(t *testing.T) {
		for _, other := range []string{body(1251, "acct-1"), body(1250, "acct-2"), `{"amount":1250,"currency":"EUR","destination":"acct-1"}`} {
			r := b.post(t, "payout-1", other)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r)
			require.Equal(t, "key-reused", r.problemType(t))
		}
	})
	t.Run("RejectedIsFinal", func(t *testing.T) {
		r := b.post(t, "payout-2", body(700, "reject-closed-account"))
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r)
		rejected := r.transfer(t)
		require.Equal(t, "rejected", rejected.Status)
		again := b.post(t, "payout-2", body(700, "reject-closed-account"))
		require.Equal(t, http.StatusUnprocessableEntity, again.status)
		require.True(t, again.replayed())
		require.Equal(t, string(r.body), string(again.body))
		require.Equal(t, []transfer{rejected}, b.byKey(t, "payout-2"))
	})
	t.Run("Gets", func(t *testing.T) {
		byID := b.get(t, "/v1/transfers/"+tr.ID)
		require.Equal(t, http.StatusOK, byID.status)
		require.Equal(t, string(first.body), string(byID.body))
		require.Equal(t, []transfer{tr}, b.byKey(t, "payout-1"))
		require.Empty(t, b.byKey(t, "never-used"))
		missing := b.get(t, "/v1/transfers/tr_missing")
		require.Equal(t, http.StatusNotFound, missing.status)
		require.Equal(t, "not-found", missing.problemType(t))
		all := b.list(t, "/v1/transfers")
		require.Len(t, all, 2)
		require.Equal(t, tr, all[0])
		require.Equal(t, "payout-2", all[1].IdempotencyKey)
	})
}

func TestInvalidRequestsStoreNothing(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t))
	for _, c := range []struct {
		name, key, body, problem string
		status                   int
	}{
		{"NoKey", "", body(100, "acct"), "key-invalid", 400},
		{"KeyTooLong", strings.Repeat("k", 256), body(100, "acct"), "key-invalid", 400},
		{"MalformedJSON", "k", `{"amount":100,`, "body-invalid", 400},
		{"TrailingData", "k", body(100, "acct") + "{}", "body-invalid", 400},
		{"ZeroAmount", "k", body(0, "acct"), "body-invalid", 400},
		{"NegativeAmount", "k", body(-5, "acct"), "body-invalid", 400},
		{"FractionalAmount", "k", `{"amount":1.5,"currency":"USD","destination":"acct"}`, "body-invalid", 400},
		{"FloatSpelledAmount", "k", `{"amount":100.0,"currency":"USD","destination":"acct"}`, "body-invalid", 400},
		{"StringAmount", "k", `{"amount":"100","currency":"USD","destination":"acct"}`, "body-invalid", 400},
		{"AmountOverInt64", "k", `{"amount":9223372036854775808,"currency":"USD","destination":"acct"}`, "body-invalid", 400},
		{"MissingAmount", "k", `{"currency":"USD","destination":"acct"}`, "body-invalid", 400},
		{"LowercaseCurrency", "k", `{"amount":100,"currency":"usd","destination":"acct"}`, "body-invalid", 400},
		{"LongCurrency", "k", `{"amount":100,"currency":"USDT","destination":"acct"}`, "body-invalid", 400},
		{"EmptyDestination", "k", body(100, ""), "body-invalid", 400},
		{"UnknownField", "k", `{"amount":100,"currency":"USD","destination":"acct","memo":"x"}`, "body-invalid", 400},
		{"TooLarge", "k", `{"amount":100,"currency":"USD","destination":"` + strings.Repeat("a", 70<<10) + `"}`, "body-too-large", 413},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := b.post(t, c.key, c.body)
			require.Equal(t, c.status, r.status, "%s", r)
			require.Equal(t, c.problem, r.problemType(t))
		})
	}
	require.Empty(t, b.list(t, "/v1/transfers"))
	// The key the invalid requests named is still free.
	r := b.post(t, "k", body(100, "acct"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	require.False(t, r.replayed())
}

// Of 32 concurrent requests with one key, one executes and every one gets
// its answer.
func TestConcurrentRequestsWithOneKeyExecuteOnce(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t))
	const n = 32
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = b.send(t.Context(), client, "same-key", body(4200, "acct-7"))
		})
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i, r := range replies {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
		require.Equal(t, string(replies[0].body), string(r.body))
		if !r.replayed() {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "exactly one request executed")
	require.Len(t, b.list(t, "/v1/transfers"), 1)
}

// A transfer acknowledged before a SIGKILL is there after the restart,
// and its retry replays it.
func TestTransfersSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t))
	first := b.post(t, "durable", body(999, "acct-9"))
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	b.kill()
	require.Error(t, b.err, "SIGKILL")

	b = startBank(t, b.db)
	tr := first.transfer(t)
	byID := b.get(t, "/v1/transfers/"+tr.ID)
	require.Equal(t, http.StatusOK, byID.status, "%s", byID)
	require.Equal(t, string(first.body), string(byID.body))
	again := b.post(t, "durable", body(999, "acct-9"))
	require.Equal(t, http.StatusCreated, again.status)
	require.True(t, again.replayed())
	require.Equal(t, string(first.body), string(again.body))
	require.Equal(t, []transfer{tr}, b.list(t, "/v1/transfers"))
}
