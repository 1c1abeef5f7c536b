package main_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	idemclient "github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/client/paymentsd"
)

// TestTypedClient drives a real paymentsd through the typed client of
// client/paymentsd and its retrying transport.
func TestTypedClient(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s *server)
		}{
			{"MoneyAndReads", testClientMoney},
			{"Problems", testClientProblems},
			{"RetriesInFlight", testClientInFlight},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, s)
			})
		}
	})
}

func typedClient(t *testing.T, s *server, u *user, tr *idemclient.Transport) *paymentsd.Client {
	t.Helper()
	cfg := paymentsd.Config{BaseURL: s.url, APIKey: u.apiKey}
	if tr != nil {
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	c, err := paymentsd.New(cfg)
	require.NoError(t, err)
	return c
}

func testClientMoney(t *testing.T, s *server) {
	ctx := context.Background()
	u := s.newUser(t)
	c := typedClient(t, s, u, nil)

	d, err := c.CreateDeposit(ctx, paymentsd.DepositParams{Currency: "USD", Amount: 10_000})
	require.NoError(t, err)
	require.Equal(t, "USD", d.Currency)
	require.Equal(t, int64(10_000), d.Amount)
	require.Equal(t, http.StatusCreated, d.Response.Status)
	require.False(t, d.Response.Replayed)
	require.NotEmpty(t, d.Response.Key, "a generated key is reported")
	require.WithinDuration(t, time.Now(), d.CreatedAt, time.Hour)

	again, err := c.CreateDeposit(ctx, paymentsd.DepositParams{Currency: "USD", Amount: 10_000, IdempotencyKey: d.Response.Key})
	require.NoError(t, err)
	require.True(t, again.Response.Replayed)
	require.Equal(t, d.ID, again.ID)

	tx, err := c.CreateTransaction(ctx, paymentsd.TransactionParams{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 1000})
	require.NoError(t, err)
	require.Equal(t, int64(920), tx.ConvertedAmount)
	require.Equal(t, "0.92", tx.Rate)

	got, err := c.Deposit(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, d.ID, got.ID)
	require.Equal(t, d.CreatedAt, got.CreatedAt)
	gotTx, err := c.Transaction(ctx, tx.ID)
	require.NoError(t, err)
	require.Equal(t, tx.ConvertedAmount, gotTx.ConvertedAmount)

	bs, err := c.Balances(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []paymentsd.Balance{{Currency: "USD", Amount: 9000}, {Currency: "EUR", Amount: 920}}, bs)
	require.Equal(t, map[string]int64{"USD": 9000, "EUR": 920}, u.entrySums(t), "one deposit moved, not two")

	r, err := c.Rates(ctx)
	require.NoError(t, err)
	require.Equal(t, "USD", r.Base)
	require.Equal(t, "0.92", r.Rates["EUR"])
	require.Equal(t, 0, r.Decimals["JPY"])
}

func testClientProblems(t *testing.T, s *server) {
	ctx := context.Background()
	u := s.newUser(t)
	c := typedClient(t, s, u, nil)

	key := newKey()
	params := paymentsd.TransactionParams{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 500, IdempotencyKey: key}
	_, err := c.CreateTransaction(ctx, params)
	var p *idemclient.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusPaymentRequired, p.Status)
	require.Equal(t, "Insufficient funds", p.Title)
	require.NotEmpty(t, p.Detail)
	require.Equal(t, paymentsd.ProblemInsufficientFunds, paymentsd.ProblemName(err))
	require.False(t, p.Replayed)

	tx, err := c.CreateTransaction(ctx, params)
	require.ErrorAs(t, err, &p)
	require.True(t, p.Replayed, "a stored 402 is replayed")
	require.Equal(t, key, tx.Response.Key)

	params.Amount = 501
	_, err = c.CreateTransaction(ctx, params)
	require.Equal(t, paymentsd.ProblemKeyReused, paymentsd.ProblemName(err))

	_, err = c.CreateDeposit(ctx, paymentsd.DepositParams{Currency: "XXX", Amount: 1})
	require.Equal(t, paymentsd.ProblemInvalidRequest, paymentsd.ProblemName(err))
	_, err = c.Deposit(ctx, "00000000-0000-0000-0000-000000000000")
	require.Equal(t, paymentsd.ProblemNotFound, paymentsd.ProblemName(err))

	stranger := typedClient(t, s, &user{apiKey: "not-a-key"}, nil)
	_, err = stranger.Balances(ctx)
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusUnauthorized, p.Status)
	require.Equal(t, paymentsd.ProblemUnauthorized, paymentsd.ProblemName(err))
}

// testClientInFlight: a key held by a running request answers 409 with
// Retry-After; the transport retries with the same key, and once the
// holder fails, the retry runs the conversion once.
func testClientInFlight(t *testing.T, s *server) {
	ctx := context.Background()
	u := s.newUser(t)
	u.deposit(t, "USD", 1000)
	key := newKey()
	lock := holdKey(t, u, "/v1/transactions", key, `{"source_currency":"USD","target_currency":"EUR","amount":100}`)

	var statuses []int
	var released atomic.Bool
	tr := &idemclient.Transport{
		MaxAttempts: 10,
		BaseDelay:   10 * time.Millisecond,
		AttemptFunc: func(a idemclient.Attempt) {
			statuses = append(statuses, a.Status)
			if a.Status == http.StatusConflict && released.CompareAndSwap(false, true) {
				require.NoError(t, s.idemStore(t).Fail(context.Background(), lock))
			}
		},
	}
	c := typedClient(t, s, u, tr)
	tx, err := c.CreateTransaction(ctx, paymentsd.TransactionParams{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 100, IdempotencyKey: key})
	require.NoError(t, err)
	require.Equal(t, []int{http.StatusConflict, http.StatusCreated}, statuses)
	require.False(t, tx.Response.Replayed)
	require.Equal(t, map[string]int64{"USD": 900, "EUR": 92}, u.balances(t))
}

// TestTypedClientPayouts pays out with the typed client through a real
// bankd: paid and replayed under its key, read back, refused for funds;
// and pending (202, not an error) when the bank does not answer.
func TestTypedClientPayouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bank := startBank(t, filepath.Join(t.TempDir(), "bank.db"))
	s := startServer(t, newDB(t, "sqlite"), payoutArgs(t, bank.url, secretFile(t), time.Hour)...)
	u := s.newUser(t)
	u.deposit(t, "USD", 10_000)
	c := typedClient(t, s, u, nil)

	p, err := c.CreatePayout(ctx, paymentsd.PayoutParams{Currency: "USD", Amount: 2500, Destination: "acct-42"})
	require.NoError(t, err)
	require.Equal(t, paymentsd.PayoutPaid, p.Status)
	require.Equal(t, http.StatusCreated, p.Response.Status)
	require.NotEmpty(t, p.BankTransferID)
	again, err := c.CreatePayout(ctx, paymentsd.PayoutParams{Currency: "USD", Amount: 2500, Destination: "acct-42", IdempotencyKey: p.Response.Key})
	require.NoError(t, err)
	require.True(t, again.Response.Replayed)
	require.Equal(t, p.ID, again.ID)
	got, err := c.Payout(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, p.BankTransferID, got.BankTransferID)
	_, err = c.CreatePayout(ctx, paymentsd.PayoutParams{Currency: "USD", Amount: 1_000_000, Destination: "acct-42"})
	require.Equal(t, paymentsd.ProblemInsufficientFunds, paymentsd.ProblemName(err), "%v", err)
	_, err = typedClient(t, s, s.newUser(t), nil).Payout(ctx, p.ID)
	require.Equal(t, paymentsd.ProblemNotFound, paymentsd.ProblemName(err), "another user's payout: %v", err)

	hole, _ := blackhole(t)
	pending := startServer(t, newDB(t, "sqlite"), "--bank-url", hole, "--bank-key-secret-file", secretFile(t), "--bank-timeout", "200ms")
	pu := pending.newUser(t)
	pu.deposit(t, "USD", 10_000)
	pp, err := typedClient(t, pending, pu, nil).CreatePayout(ctx, paymentsd.PayoutParams{Currency: "USD", Amount: 2500, Destination: "acct-42"})
	require.NoError(t, err)
	require.Equal(t, paymentsd.PayoutPending, pp.Status)
	require.Equal(t, http.StatusAccepted, pp.Response.Status)
}
