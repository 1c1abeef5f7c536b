package chaos

import (
	"fmt"
	"testing"

	"github.com/idem-dev/idem/cmd/internal/bank"
	"github.com/idem-dev/idem/internal/require"
)

func payoutOp(u *User, key, dest string, amount int64) *Op {
	return &Op{User: u, Key: key, Kind: OpPayout, Path: "/v1/payouts", Scenario: "sdk",
		Body: fmt.Appendf(nil, `{"currency":"USD","amount":%d,"destination":%q}`, amount, dest)}
}

// payoutAnswer is paymentsd's answer about payout id; transfer "" is null.
func payoutAnswer(status int, id, dest string, amount int64, state, transfer string, replayed bool) Attempt {
	tr := "null"
	if transfer != "" {
		tr = fmt.Sprintf("%q", transfer)
	}
	return Attempt{Status: status, Replayed: replayed, Body: fmt.Appendf(nil,
		`{"id":%q,"currency":"USD","amount":%d,"destination":%q,"status":%q,"bank_transfer_id":%s,"created_at":"2026-01-01T00:00:00.000000Z"}`+"\n",
		id, amount, dest, state, tr)}
}

// payoutFixture is a run that went right: Alice deposited 1000.00, was
// paid 10.00 (op-1), was refused by the bank for 20.00 and refunded
// (op-2), asked for more than she had (op-3, 402), and got a 202 for
// 30.00 (op-4), which the completer paid and her recheck replayed.
func payoutFixture() (payouts, deposits []*Op, users []*User, st *payoutState) {
	alice := &User{ID: "alice"}
	dep := depositOp(alice, "op-0", 100_000)
	dep.Attempts = []Attempt{created("d1", 100_000, false)}

	paid := payoutOp(alice, "op-1", "acct-1", 1000)
	a := payoutAnswer(201, "p1", "acct-1", 1000, "paid", "tr1", false)
	paid.Attempts = []Attempt{{Err: "timeout"}, a, {Status: a.Status, Body: a.Body, Replayed: true}}

	rejected := payoutOp(alice, "op-2", "reject-2", 2000)
	rejected.Attempts = []Attempt{payoutAnswer(201, "p2", "reject-2", 2000, "failed", "tr2", false)}

	refused := payoutOp(alice, "op-3", "acct-3", 999_000)
	refused.Attempts = []Attempt{{Status: 402, Body: []byte(`{"type":"insufficient-funds"}`)}, {Status: 402, Body: []byte(`{"type":"insufficient-funds"}`), Replayed: true}}

	pending := payoutOp(alice, "op-4", "acct-4", 3000)
	pending.Attempts = []Attempt{{Status: 503}, payoutAnswer(202, "p4", "acct-4", 3000, "pending", "", false),
		payoutAnswer(201, "p4", "acct-4", 3000, "paid", "tr4", true)}

	row := func(id, key, dest string, amount int64, status, bankKey, transfer string) payoutRow {
		return payoutRow{user: "alice", id: id, cur: "USD", dest: dest, status: status, bankKey: bankKey, amount: amount, key: str(key), transferID: str(transfer)}
	}
	st = &payoutState{
		dbState: &dbState{
			entries: map[string][]entryRow{
				"d1": {{"USD", 100_000}}, "p1": {{"USD", -1000}}, "p2": {{"USD", 2000}, {"USD", -2000}}, "p4": {{"USD", -3000}},
			},
			balances: map[userCur]int64{{"alice", "USD"}: 96_000},
			sums:     map[userCur]int64{{"alice", "USD"}: 96_000},
		},
		payouts: map[string]payoutRow{
			"p1": row("p1", "op-1", "acct-1", 1000, "paid", "k1", "tr1"),
			"p2": row("p2", "op-2", "reject-2", 2000, "failed", "k2", "tr2"),
			"p4": row("p4", "op-4", "acct-4", 3000, "paid", "k4", "tr4"),
		},
		transfers: []bank.Transfer{
			{ID: "tr1", IdempotencyKey: "k1", Amount: 1000, Currency: "USD", Destination: "acct-1", Status: "settled"},
			{ID: "tr2", IdempotencyKey: "k2", Amount: 2000, Currency: "USD", Destination: "reject-2", Status: "rejected"},
			{ID: "tr4", IdempotencyKey: "k4", Amount: 3000, Currency: "USD", Destination: "acct-4", Status: "settled"},
		},
		stuck: map[string]bool{},
	}
	return []*Op{paid, rejected, refused, pending}, []*Op{dep}, []*User{alice}, st
}

func checkAllPayouts(payouts, deposits []*Op, users []*User, st *payoutState) *Verdict {
	v := &Verdict{}
	checkPayouts(v, st, payouts)
	checkPayoutBalances(v, st, deposits, users)
	return v
}

func TestVerifyPayoutsHealthy(t *testing.T) {
	t.Parallel()
	v := checkAllPayouts(payoutFixture())
	require.False(t, v.Failed(), "%v", v.Details)
	p := v.Payouts
	require.Equal(t, 4, p.Ops)
	require.Equal(t, [4]int{1, 1, 1, 1}, [4]int{p.Paid, p.Failed, p.Pending, p.Refused})
	require.Equal(t, [2]int{2, 1}, [2]int{p.Settled, p.Rejected})
}

func TestVerifyPayoutsCatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		spoil func(payouts []*Op, st *payoutState)
		field func(*Verdict) int
	}{
		{"SecondPayoutPaidForOneKey", func(_ []*Op, st *payoutState) {
			// A retry that debited and sent a payout of its own.
			st.payouts["p1b"] = payoutRow{user: "alice", id: "p1b", cur: "USD", dest: "acct-1", status: "paid", bankKey: "k1b",
				amount: 1000, key: str("op-1"), transferID: str("tr1b")}
			st.entries["p1b"] = []entryRow{{"USD", -1000}}
			st.transfers = append(st.transfers, bank.Transfer{ID: "tr1b", IdempotencyKey: "k1b", Amount: 1000, Currency: "USD", Destination: "acct-1", Status: "settled"})
			st.balances[userCur{"alice", "USD"}] -= 1000
			st.sums[userCur{"alice", "USD"}] -= 1000
		}, func(v *Verdict) int { return v.Payouts.PaidTwice }},
		{"PaidWithoutTransfer", func(_ []*Op, st *payoutState) {
			st.transfers = st.transfers[1:] // the bank never got tr1
		}, func(v *Verdict) int { return v.Payouts.Unpaid }},
		{"RejectedNeverRefunded", func(_ []*Op, st *payoutState) {
			st.entries["p2"] = st.entries["p2"][1:]
			st.balances[userCur{"alice", "USD"}] -= 2000
			st.sums[userCur{"alice", "USD"}] -= 2000
		}, func(v *Verdict) int { return v.Payouts.Unpaid }},
		{"TransferWithoutDebit", func(_ []*Op, st *payoutState) {
			st.transfers = append(st.transfers, bank.Transfer{ID: "tr9", IdempotencyKey: "k9", Amount: 900, Currency: "USD", Destination: "acct-9", Status: "settled"})
		}, func(v *Verdict) int { return v.Payouts.Orphans }},
		{"PendingAfterQuiet", func(_ []*Op, st *payoutState) {
			st.stuck["p4"] = true
		}, func(v *Verdict) int { return v.Payouts.NotFinal }},
		{"StillPendingAtTheEnd", func(_ []*Op, st *payoutState) {
			p := st.payouts["p4"]
			p.status, p.transferID = "pending", nil
			st.payouts["p4"] = p
		}, func(v *Verdict) int { return v.Payouts.NotFinal }},
		{"RecordUnfinished", func(_ []*Op, st *payoutState) {
			st.unfinished = []userKey{{"alice", "op-1"}}
		}, func(v *Verdict) int { return v.Payouts.NotFinal }},
		{"BankMovedAnotherAmount", func(_ []*Op, st *payoutState) {
			st.transfers[0].Amount = 1001
		}, func(v *Verdict) int { return v.Payouts.Mismatches }},
		{"RefundedThoughPaid", func(_ []*Op, st *payoutState) {
			p := st.payouts["p4"]
			p.status = "failed"
			st.payouts["p4"] = p
			st.entries["p4"] = append(st.entries["p4"], entryRow{"USD", 3000})
		}, func(v *Verdict) int { return v.Payouts.Mismatches }},
		{"RefundedWithoutRejection", func(_ []*Op, st *payoutState) {
			st.transfers = st.transfers[:1] // the bank never rejected p2
		}, func(v *Verdict) int { return v.Payouts.Mismatches }},
		{"ToldFailedWhenPaid", func(payouts []*Op, _ *payoutState) {
			payouts[0].Attempts = []Attempt{payoutAnswer(201, "p1", "acct-1", 1000, "failed", "tr1", false)}
		}, func(v *Verdict) int { return v.Payouts.Answers }},
		{"ReplayDiffers", func(payouts []*Op, _ *payoutState) {
			a := payouts[0].Attempts[1]
			payouts[0].Attempts[2] = Attempt{Status: 201, Replayed: true, Body: append(a.Body[:len(a.Body):len(a.Body)], ' ')}
		}, func(v *Verdict) int { return v.Payouts.Answers }},
		{"ExecutedTwice", func(payouts []*Op, _ *payoutState) {
			payouts[0].Attempts[2].Replayed = false
		}, func(v *Verdict) int { return v.Payouts.Answers }},
		{"MoneyMovedBehind402", func(_ []*Op, st *payoutState) {
			st.payouts["p3"] = payoutRow{user: "alice", id: "p3", cur: "USD", dest: "acct-3", status: "paid", bankKey: "k3",
				amount: 999_000, key: str("op-3"), transferID: str("tr3")}
			st.entries["p3"] = []entryRow{{"USD", -999_000}}
			st.transfers = append(st.transfers, bank.Transfer{ID: "tr3", IdempotencyKey: "k3", Amount: 999_000, Currency: "USD", Destination: "acct-3", Status: "settled"})
		}, func(v *Verdict) int { return v.Payouts.Answers }},
		{"PendingReplayed", func(payouts []*Op, _ *payoutState) {
			payouts[3].Attempts[1].Replayed = true
		}, func(v *Verdict) int { return v.Payouts.Answers }},
		{"AnotherPayoutsAnswer", func(payouts []*Op, _ *payoutState) {
			payouts[3].Attempts[1] = payoutAnswer(202, "p1", "acct-4", 3000, "pending", "", false)
		}, func(v *Verdict) int { return v.Payouts.Answers }},
		{"NoFinalAnswer", func(payouts []*Op, _ *payoutState) {
			payouts[3].Attempts = payouts[3].Attempts[:1]
		}, func(v *Verdict) int { return v.NoFinal }},
		{"BalanceOff", func(_ []*Op, st *payoutState) {
			st.balances[userCur{"alice", "USD"}]++
		}, func(v *Verdict) int { return v.BalanceErrors }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			payouts, deposits, users, st := payoutFixture()
			c.spoil(payouts, st)
			v := checkAllPayouts(payouts, deposits, users, st)
			require.True(t, v.Failed())
			require.Positive(t, c.field(v), "counted elsewhere: %v", v.Details)
		})
	}
}
