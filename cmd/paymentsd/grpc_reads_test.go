package main_test

import (
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

// TestGRPCReadsAndPayouts reads over gRPC what the HTTP API reads, scoped
// by the caller (another user's id is NotFound), and pays out through a
// real bankd: paid, replayed, refused for funds.
func TestGRPCReadsAndPayouts(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			bank := startBank(t, filepath.Join(t.TempDir(), "bank.db"))
			s := startServer(t, newDB(t, store), append(payoutArgs(t, bank.url, secretFile(t), time.Hour), "--grpc-addr", "127.0.0.1:0")...)
			u, other := grpcDial(t, s, s.newUser(t)), grpcDial(t, s, s.newUser(t))

			d, err := u.client.CreateDeposit(u.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 10000})
			require.NoError(t, err)
			got, err := u.client.GetDeposit(u.call(""), &paymentsv1.GetDepositRequest{Id: d.GetId()})
			require.NoError(t, err)
			require.True(t, proto.Equal(d, got), "%v != %v", d, got)
			tr, err := u.client.CreateTransaction(u.call(newKey()), &paymentsv1.CreateTransactionRequest{SourceCurrency: "USD", TargetCurrency: "EUR", Amount: 1000})
			require.NoError(t, err)
			gotTr, err := u.client.GetTransaction(u.call(""), &paymentsv1.GetTransactionRequest{Id: tr.GetId()})
			require.NoError(t, err)
			require.True(t, proto.Equal(tr, gotTr), "%v != %v", tr, gotTr)

			key := newKey()
			req := &paymentsv1.CreatePayoutRequest{Currency: "USD", Amount: 2500, Destination: "acct-42"}
			paid, err := u.client.CreatePayout(u.call(key), req)
			require.NoError(t, err)
			require.Equal(t, "paid", paid.GetStatus())
			require.NotEmpty(t, paid.GetBankTransferId())
			var h metadata.MD
			again, err := u.client.CreatePayout(u.call(key), req, grpc.Header(&h))
			require.NoError(t, err)
			require.True(t, proto.Equal(paid, again))
			require.Equal(t, []string{"true"}, h.Get("idempotent-replayed"))
			gotP, err := u.client.GetPayout(u.call(""), &paymentsv1.GetPayoutRequest{Id: paid.GetId()})
			require.NoError(t, err)
			require.True(t, proto.Equal(paid, gotP), "%v != %v", paid, gotP)
			_, err = u.client.CreatePayout(u.call(newKey()), &paymentsv1.CreatePayoutRequest{Currency: "USD", Amount: 1_000_000, Destination: "acct-42"})
			require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
			require.Equal(t, "insufficient-funds", grpcReason(t, err)["reason"])
			_, err = u.client.CreatePayout(u.call(""), req)
			require.Equal(t, "key-missing", grpcReason(t, err)["reason"], "a payout needs a key")

			b, err := u.client.GetBalances(u.call(""), &paymentsv1.GetBalancesRequest{})
			require.NoError(t, err)
			balances := map[string]int64{}
			for _, x := range b.GetBalances() {
				balances[x.GetCurrency()] = x.GetAmount()
			}
			require.Equal(t, u.balances(t), balances)
			require.Equal(t, map[string]int64{"USD": 6500, "EUR": 920}, balances)
			rates, err := u.client.GetRates(u.call(""), &paymentsv1.GetRatesRequest{})
			require.NoError(t, err)
			require.Equal(t, "0.92", rates.GetRates()["EUR"])

			// Another user's ids are not found, and a missing one neither.
			for name, read := range map[string]func() error{
				"deposit": func() error {
					_, err := other.client.GetDeposit(other.call(""), &paymentsv1.GetDepositRequest{Id: d.GetId()})
					return err
				},
				"transaction": func() error {
					_, err := other.client.GetTransaction(other.call(""), &paymentsv1.GetTransactionRequest{Id: tr.GetId()})
					return err
				},
				"payout": func() error {
					_, err := other.client.GetPayout(other.call(""), &paymentsv1.GetPayoutRequest{Id: paid.GetId()})
					return err
				},
				"empty id": func() error { _, err := u.client.GetPayout(u.call(""), &paymentsv1.GetPayoutRequest{}); return err },
				"slashed id": func() error {
					_, err := u.client.GetDeposit(u.call(""), &paymentsv1.GetDepositRequest{Id: "../balances"})
					return err
				},
			} {
				err := read()
				require.Equal(t, codes.NotFound, status.Code(err), "%s: %v", name, err)
				require.Equal(t, "not-found", grpcReason(t, err)["reason"], name)
			}
			_, err = other.client.GetBalances(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer nope"), &paymentsv1.GetBalancesRequest{})
			require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
		})
	}
}

// TestGRPCPayoutPending pays out to a bank that never answers: the call
// answers OK with status pending (the HTTP API's 202), stores nothing,
// and its retry resumes the same payout, never a second one.
func TestGRPCPayoutPending(t *testing.T) {
	t.Parallel()
	bankURL, accepted := blackhole(t)
	s := startServer(t, newDB(t, "sqlite"), "--bank-url", bankURL, "--bank-key-secret-file", secretFile(t),
		"--bank-timeout", "200ms", "--complete-interval", "1h", "--grpc-addr", "127.0.0.1:0")
	u := grpcDial(t, s, s.newUser(t))
	_, err := u.client.CreateDeposit(u.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 10000})
	require.NoError(t, err)

	key := newKey()
	req := &paymentsv1.CreatePayoutRequest{Currency: "USD", Amount: 2500, Destination: "acct-42"}
	first, err := u.client.CreatePayout(u.call(key), req)
	require.NoError(t, err)
	require.Equal(t, "pending", first.GetStatus())
	<-accepted
	var h metadata.MD
	again, err := u.client.CreatePayout(u.call(key), req, grpc.Header(&h))
	require.NoError(t, err)
	require.Equal(t, "pending", again.GetStatus())
	require.Equal(t, first.GetId(), again.GetId(), "resumed, not paid again")
	require.Empty(t, h.Get("idempotent-replayed"), "a pending answer is not stored")
	require.Equal(t, map[string]int64{"USD": 7500}, u.balances(t), "debited once")
}
