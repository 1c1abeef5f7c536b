package ledgertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/money"
)

func testUsers(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	has, err := s.HasUsers(ctx)
	require.NoError(t, err)
	require.False(t, has)

	id, key, err := s.CreateUser(ctx)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(key, payments.APIKeyPrefix))
	require.Len(t, key, len(payments.APIKeyPrefix)+43, "256 bits, base64url")
	has, err = s.HasUsers(ctx)
	require.NoError(t, err)
	require.True(t, has)

	got, err := s.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, id, got)
	for _, bad := range []string{"", key + "x", payments.NewAPIKey(), strings.TrimPrefix(key, payments.APIKeyPrefix)} {
		_, err := s.Authenticate(ctx, bad)
		require.ErrorIs(t, err, payments.ErrUnauthorized, "%q", bad)
	}
	other, otherKey, err := s.CreateUser(ctx)
	require.NoError(t, err)
	require.NotEqual(t, id, other)
	require.NotEqual(t, key, otherKey)
}

func testDepositAndBalances(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	requireBalances(t, s, user, map[string]int64{})

	d := deposit(t, s, user, "USD", 10000)
	_, err := uuid.Parse(d.ID)
	require.NoError(t, err)
	require.Equal(t, "USD", d.Currency)
	require.Equal(t, int64(10000), d.Amount)
	require.WithinDuration(t, time.Now(), d.CreatedAt, time.Minute)
	deposit(t, s, user, "USD", 1)
	deposit(t, s, user, "JPY", 500)
	requireBalances(t, s, user, map[string]int64{"USD": 10001, "JPY": 500})

	got, err := s.GetDeposit(ctx, user, d.ID)
	require.NoError(t, err)
	require.Equal(t, d.ID, got.ID)
	require.Equal(t, d.Amount, got.Amount)
	require.Equal(t, d.Currency, got.Currency)
	require.True(t, d.CreatedAt.Equal(got.CreatedAt))

	bs, err := s.Balances(ctx, user)
	require.NoError(t, err)
	require.Equal(t, []payments.Balance{{Currency: "JPY", Amount: 500}, {Currency: "USD", Amount: 10001}}, bs, "ordered by currency")
}

func testConvert(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 10000)

	tr, err := s.Convert(ctx, user, "", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 1000})
	require.NoError(t, err)
	require.Equal(t, int64(920), tr.ConvertedAmount)
	require.Equal(t, "0.92", tr.Rate)
	require.Equal(t, payments.StatusCompleted, tr.Status)
	requireBalances(t, s, user, map[string]int64{"USD": 9000, "EUR": 920})

	// Back the other way, and into a zero-decimal currency.
	back, err := s.Convert(ctx, user, "", payments.TransferRequest{SourceCurrency: "EUR", TargetCurrency: "USD", Amount: 920})
	require.NoError(t, err)
	require.Equal(t, "1.0869565217", back.Rate)
	require.Equal(t, int64(999), back.ConvertedAmount) // 9.20 × 1.0869565217 = 9.99999999964 → 9.99: never back above the start
	yen, err := s.Convert(ctx, user, "", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "JPY", Amount: 333})
	require.NoError(t, err)
	require.Equal(t, int64(504), yen.ConvertedAmount) // 3.33 × 151.5 = 504.495 → 504
	requireBalances(t, s, user, map[string]int64{"USD": 9666, "EUR": 0, "JPY": 504})

	got, err := s.GetTransaction(ctx, user, yen.ID)
	require.NoError(t, err)
	require.Equal(t, yen.ID, got.ID)
	require.Equal(t, yen.Rate, got.Rate)
	require.Equal(t, yen.ConvertedAmount, got.ConvertedAmount)
	require.Equal(t, yen.Status, got.Status)
	require.True(t, yen.CreatedAt.Equal(got.CreatedAt))
	// An upper-case id is the same id.
	_, err = s.GetTransaction(ctx, user, strings.ToUpper(yen.ID))
	require.NoError(t, err)
}

func testInsufficientFunds(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 500)

	_, err := s.Convert(ctx, user, "k1", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 501})
	var ife *payments.InsufficientFundsError
	require.ErrorAs(t, err, &ife)
	require.Equal(t, payments.InsufficientFundsError{Currency: "USD", Balance: 500, Requested: 501}, *ife)
	// From a currency never held.
	_, err = s.Convert(ctx, user, "k2", payments.TransferRequest{SourceCurrency: "GBP", TargetCurrency: "EUR", Amount: 1})
	require.ErrorAs(t, err, &ife)
	requireBalances(t, s, user, map[string]int64{"USD": 500})

	// Nothing was kept of the refused transactions: their keys are free.
	_, err = s.Convert(ctx, user, "k1", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 500})
	require.NoError(t, err)
	requireBalances(t, s, user, map[string]int64{"USD": 0, "EUR": 460})
}

func testValidation(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 10000)

	fields := func(err error) []string {
		var v *payments.ValidationError
		require.ErrorAs(t, err, &v)
		var out []string
		for _, f := range v.Fields {
			out = append(out, f.Field)
		}
		return out
	}
	for _, c := range []struct {
		name string
		req  payments.DepositRequest
		want []string
	}{
		{"Empty", payments.DepositRequest{}, []string{"currency", "amount"}},
		{"Lower", payments.DepositRequest{Currency: "usd", Amount: 1}, []string{"currency"}},
		{"Unsupported", payments.DepositRequest{Currency: "CHF", Amount: 1}, []string{"currency"}},
		{"Zero", payments.DepositRequest{Currency: "USD", Amount: 0}, []string{"amount"}},
		{"Negative", payments.DepositRequest{Currency: "USD", Amount: -5}, []string{"amount"}},
		{"TooLarge", payments.DepositRequest{Currency: "USD", Amount: money.MaxAmount + 1}, []string{"amount"}},
	} {
		_, err := s.Deposit(ctx, user, "", c.req)
		require.Equal(t, c.want, fields(err), c.name)
	}
	_, err := s.Deposit(ctx, user, "", payments.DepositRequest{Currency: "USD", Amount: money.MaxAmount})
	require.NoError(t, err, "the largest amount is allowed")

	for _, c := range []struct {
		name string
		req  payments.TransferRequest
		want []string
	}{
		{"Empty", payments.TransferRequest{}, []string{"source_currency", "target_currency", "amount"}},
		{"Equal", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "USD", Amount: 1}, []string{"target_currency"}},
		{"Unsupported", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "XXX", Amount: 1}, []string{"target_currency"}},
		{"TooLarge", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: money.MaxAmount + 1}, []string{"amount"}},
		// 10^15 cents is 870 × 10^15 centavos: past the limit.
		{"ConvertsTooLarge", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "ARS", Amount: money.MaxAmount}, []string{"amount"}},
		// One centavo is 0.00115 cents.
		{"ConvertsToZero", payments.TransferRequest{SourceCurrency: "ARS", TargetCurrency: "USD", Amount: 1}, []string{"amount"}},
	} {
		_, err := s.Convert(ctx, user, "", c.req)
		require.Equal(t, c.want, fields(err), c.name)
	}
	requireBalances(t, s, user, map[string]int64{"USD": 10000 + money.MaxAmount})
}

func testNotFound(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	alice, bob := newUser(t, s), newUser(t, s)
	d := deposit(t, s, alice, "USD", 100)
	tr, err := s.Convert(ctx, alice, "", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 100})
	require.NoError(t, err)

	_, err = s.GetTransaction(ctx, bob, tr.ID)
	require.ErrorIs(t, err, payments.ErrNotFound, "another user's transaction")
	_, err = s.GetDeposit(ctx, bob, d.ID)
	require.ErrorIs(t, err, payments.ErrNotFound, "another user's deposit")
	_, err = s.GetTransaction(ctx, alice, d.ID)
	require.ErrorIs(t, err, payments.ErrNotFound, "a deposit is not a transaction")
	for _, id := range []string{uuid.NewString(), "", "nope", "1", tr.ID + "0", "{" + tr.ID + "}", strings.ReplaceAll(tr.ID, "-", "")} {
		_, err = s.GetTransaction(ctx, alice, id)
		require.ErrorIs(t, err, payments.ErrNotFound, "%q", id)
	}
}

func testBalanceLimit(t *testing.T, h Harness) {
	ctx := context.Background()
	_, err := payments.New(h.Ledger, payments.Config{MaxBalance: money.MaxAmount - 1})
	require.Error(t, err, "a limit below the largest amount")

	s := newService(t, h, payments.Config{MaxBalance: money.MaxAmount})
	user := newUser(t, s)
	deposit(t, s, user, "USD", money.MaxAmount)
	deposit(t, s, user, "EUR", money.MaxAmount)
	var ble *payments.BalanceLimitError
	_, err = s.Deposit(ctx, user, "", payments.DepositRequest{Currency: "USD", Amount: 1})
	require.ErrorAs(t, err, &ble)
	require.Equal(t, payments.BalanceLimitError{Currency: "USD", Balance: money.MaxAmount, Credit: 1, Limit: money.MaxAmount}, *ble)
	_, err = s.Convert(ctx, user, "", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 100})
	require.ErrorAs(t, err, &ble)
	requireBalances(t, s, user, map[string]int64{"USD": money.MaxAmount, "EUR": money.MaxAmount})
}

// testKeyBindsNothing: the Idempotency-Key a movement keeps is plain data
// for support. Whether a request runs is the idem middleware's decision, on
// its key record; the business tables neither refuse nor release a key, so
// a key whose record is gone (past retention and swept, however it was
// swept) makes a movement like any other.
func testKeyBindsNothing(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	user := newUser(t, s)
	deposit(t, s, user, "USD", 10000)
	// Other amounts each time, so that the minute net does not fire.
	for _, amount := range []int64{100, 200} {
		_, err := s.Convert(ctx, user, "k", payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: amount})
		require.NoError(t, err)
		_, err = s.Deposit(ctx, user, "k", payments.DepositRequest{Currency: "GBP", Amount: amount / 2})
		require.NoError(t, err)
	}
	requireBalances(t, s, user, map[string]int64{"USD": 9700, "EUR": 92 + 184, "GBP": 150})
}

func testMinuteNet(t *testing.T, h Harness) {
	ctx := context.Background()
	s := newService(t, h, payments.Config{})
	alice, bob := newUser(t, s), newUser(t, s)
	deposit(t, s, alice, "USD", 10000)
	deposit(t, s, bob, "USD", 10000)
	req := payments.TransferRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 100}

	first, err := s.Convert(ctx, alice, "a", req)
	require.NoError(t, err)
	second, err := s.Convert(ctx, alice, "b", req)
	if err == nil {
		// The two fell into different minutes; the next one cannot.
		require.NotEqual(t, first.CreatedAt.Truncate(time.Minute), second.CreatedAt.Truncate(time.Minute))
		_, err = s.Convert(ctx, alice, "c", req)
	}
	require.ErrorIs(t, err, payments.ErrDuplicateTransfer)
	require.ErrorIs(t, err, payments.ErrDuplicate)
	_, err = s.Convert(ctx, alice, "", req)
	require.ErrorIs(t, err, payments.ErrDuplicateTransfer, "without a key too")

	// Another amount, direction, pair or user is another transaction.
	for _, r := range []payments.TransferRequest{
		{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 101},
		{SourceCurrency: "USD", TargetCurrency: "GBP", Amount: 100},
		{SourceCurrency: "EUR", TargetCurrency: "USD", Amount: 50},
	} {
		_, err := s.Convert(ctx, alice, "", r)
		require.NoError(t, err, "%+v", r)
	}
	_, err = s.Convert(ctx, bob, "", req)
	require.NoError(t, err)
}
