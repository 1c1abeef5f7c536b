package chaos

import (
	"fmt"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// A checker that always passes is the worst bug a chaos harness can have:
// these tests feed the checks the traces of real failures and require each
// to be counted where the table says.

func depositOp(u *User, key string, amount int64) *Op {
	return &Op{User: u, Key: key, Kind: OpDeposit, Path: "/v1/deposits", Scenario: "sdk",
		Body: fmt.Appendf(nil, `{"currency":"USD","amount":%d}`, amount)}
}

func created(id string, amount int64, replayed bool) Attempt {
	return Attempt{Status: 201, Replayed: replayed,
		Body: fmt.Appendf(nil, `{"id":%q,"currency":"USD","amount":%d,"created_at":"2026-01-01T00:00:00.000000Z"}`+"\n", id, amount)}
}

func code(n int32) *int32 { return &n }

func str(s string) *string { return &s }

// state is a database that holds exactly what the callers were told.
func state(u *User, key, id string, amount int64, body []byte) *dbState {
	return &dbState{
		keys:    map[userKey]keyRow{{u.ID, key}: {status: "COMPLETED", code: code(201), body: body}},
		rows:    map[string]businessRow{id: {user: u.ID, id: id, kind: "deposit", key: str(key), src: "USD", amount: amount}},
		entries: map[string][]entryRow{id: {{"USD", amount}}},
	}
}

func check(ops []*Op, st *dbState) *Verdict {
	v := &Verdict{Keys: len(ops)}
	acks := map[string]ack{}
	for _, op := range ops {
		checkAnswers(v, op, acks, st)
	}
	checkEffects(v, st, acks, ops)
	return v
}

func TestVerifyHealthy(t *testing.T) {
	t.Parallel()
	alice := &User{ID: "alice"}
	op := depositOp(alice, "op-1", 100_01)
	first := created("d1", 100_01, false)
	op.Attempts = []Attempt{{Err: "timeout"}, {Status: 409, RetryAfter: "1"}, first, created("d1", 100_01, true)}
	v := check([]*Op{op}, state(alice, "op-1", "d1", 100_01, first.Body))
	require.False(t, v.Failed(), "%v", v.Details)
	require.Equal(t, 1, v.Executed)
}

func TestVerifyCatches(t *testing.T) {
	t.Parallel()
	alice, bob := &User{ID: "alice"}, &User{ID: "bob"}
	cases := []struct {
		name  string
		setup func() ([]*Op, *dbState)
		field func(*Verdict) int
	}{
		{"SecondExecutionWithoutKey", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a}
			st := state(alice, "op-1", "d1", 100_01, a.Body)
			st.rows["d2"] = businessRow{user: "alice", id: "d2", kind: "deposit", src: "USD", amount: 100_01}
			st.entries["d2"] = []entryRow{{"USD", 100_01}}
			return []*Op{op}, st
		}, func(v *Verdict) int { return v.DoubleEffects }},
		{"ExtraLedgerEntry", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a}
			st := state(alice, "op-1", "d1", 100_01, a.Body)
			st.entries["d1"] = append(st.entries["d1"], entryRow{"USD", 100_01})
			return []*Op{op}, st
		}, func(v *Verdict) int { return v.DoubleEffects }},
		{"AcknowledgedRowMissing", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a}
			st := state(alice, "op-1", "d1", 100_01, a.Body)
			delete(st.rows, "d1")
			return []*Op{op}, st
		}, func(v *Verdict) int { return v.LostWrites }},
		{"StoredBodyDiffers", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a}
			return []*Op{op}, state(alice, "op-1", "d1", 100_01, append([]byte(" "), a.Body...))
		}, func(v *Verdict) int { return v.LostWrites }},
		{"NoFinalAnswer", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			op.Attempts = []Attempt{{Status: 503}, {Status: 409, RetryAfter: "1"}}
			return []*Op{op}, &dbState{keys: map[userKey]keyRow{}, rows: map[string]businessRow{}}
		}, func(v *Verdict) int { return v.NoFinal }},
		{"MoneyMovedBehind402", func() ([]*Op, *dbState) {
			op := &Op{User: alice, Key: "op-1", Kind: OpTransaction, Path: "/v1/transactions", Scenario: "sdk",
				Body: []byte(`{"source_currency":"USD","target_currency":"EUR","amount":500}`)}
			op.Attempts = []Attempt{{Status: 402, Body: []byte(`{}`)}}
			st := &dbState{
				keys:    map[userKey]keyRow{{"alice", "op-1"}: {status: "COMPLETED", code: code(402), body: []byte(`{}`)}},
				rows:    map[string]businessRow{"t1": {user: "alice", id: "t1", kind: "transaction", key: str("op-1"), src: "USD", dst: "EUR", amount: 500, converted: 460}},
				entries: map[string][]entryRow{"t1": {{"USD", -500}, {"EUR", 460}}},
			}
			return []*Op{op}, st
		}, func(v *Verdict) int { return v.UnackedEffects }},
		{"ReplayDiffers", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a, created("d1", 100_01, true), {Status: 201, Replayed: true, Body: append(a.Body, ' ')}}
			return []*Op{op}, state(alice, "op-1", "d1", 100_01, a.Body)
		}, func(v *Verdict) int { return v.WrongAnswers }},
		{"ExecutedTwice", func() ([]*Op, *dbState) {
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a, a}
			return []*Op{op}, state(alice, "op-1", "d1", 100_01, a.Body)
		}, func(v *Verdict) int { return v.WrongAnswers }},
		{"ReusedKeyAccepted", func() ([]*Op, *dbState) {
			first := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			first.Attempts = []Attempt{a}
			reuse := depositOp(alice, "op-1", 999_01)
			reuse.Kind, reuse.Reused = OpReuse, first
			reuse.Attempts = []Attempt{{Status: 201, Replayed: true, Body: a.Body}}
			return []*Op{first, reuse}, state(alice, "op-1", "d1", 100_01, a.Body)
		}, func(v *Verdict) int { return v.WrongAnswers }},
		{"AnotherUsersReplay", func() ([]*Op, *dbState) {
			// Bob sent the same key string; Alice's answer was replayed to him.
			op := depositOp(alice, "op-1", 100_01)
			a := created("d1", 100_01, false)
			op.Attempts = []Attempt{a}
			bobs := depositOp(bob, "op-1", 100_02)
			bobs.Attempts = []Attempt{{Status: 201, Replayed: true, Body: a.Body}}
			st := state(alice, "op-1", "d1", 100_01, a.Body)
			st.keys[userKey{"bob", "op-1"}] = keyRow{status: "COMPLETED", code: code(201), body: a.Body}
			return []*Op{op, bobs}, st
		}, func(v *Verdict) int { return v.Foreign }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ops, st := c.setup()
			v := check(ops, st)
			require.True(t, v.Failed())
			require.Positive(t, c.field(v), "counted elsewhere: %v", v.Details)
		})
	}
}

func TestAttemptFinal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a     Attempt
		final bool
	}{
		{Attempt{Status: 201}, true},
		{Attempt{Status: 402}, true},
		{Attempt{Status: 422}, true},
		{Attempt{Status: 409}, true}, // a business net: final
		{Attempt{Status: 409, RetryAfter: "1"}, false},
		{Attempt{Status: 408}, false},
		{Attempt{Status: 429}, false},
		{Attempt{Status: 500}, false},
		{Attempt{Status: 503}, false},
		{Attempt{Err: "timeout"}, false},
	} {
		require.Equal(t, c.final, c.a.Final(), "%+v", c.a)
	}
}

func TestTally(t *testing.T) {
	t.Parallel()
	ok := &Result{Mode: "atomic", Verdict: &Verdict{}}
	bad := &Result{Mode: "leased", Verdict: &Verdict{LostWrites: 2, LiveLocks: 1}}
	passed, failed := Tally([]*Result{ok, bad})
	n := len((&Verdict{}).Invariants())
	require.Equal(t, 2*n-2, passed)
	require.Equal(t, 2, failed)
}
