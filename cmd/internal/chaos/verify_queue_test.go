package chaos

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// queued is a deposit command of u that JetStream acknowledged once.
func queued(u *User, key string, amount int64, answers ...Attempt) *Command {
	c := &Command{Op: depositOp(u, key, amount)}
	c.Attempts = answers
	c.acked.Add(1)
	return c
}

func checkQueued(cmds []*Command, st *dbState, results ...Attempt) *Verdict {
	v := &Verdict{}
	keys := make([]string, len(results))
	for i := range keys {
		keys[i] = cmds[0].Key
	}
	checkQueue(v, st, cmds, keys, results)
	return v
}

func TestVerifyQueueHealthy(t *testing.T) {
	t.Parallel()
	alice := &User{ID: "alice"}
	first := created("d1", 100_51, false)
	c := queued(alice, "q-1", 100_51, first, created("d1", 100_51, true), Attempt{Status: 503})
	st := state(alice, "q-1", "d1", 100_51, first.Body)
	v := checkQueued([]*Command{c}, st, first)
	require.False(t, v.Failed(), "%v", v.Details)
	require.Equal(t, 1, v.QueueCommands)
}

func TestVerifyQueueCatches(t *testing.T) {
	t.Parallel()
	alice := &User{ID: "alice"}
	healthy := func() (*Command, *dbState, Attempt) {
		a := created("d1", 100_51, false)
		return queued(alice, "q-1", 100_51, a), state(alice, "q-1", "d1", 100_51, a.Body), a
	}
	reuse := func(c *Command, answers ...Attempt) *Command {
		r := queued(alice, c.Key, 999_51, answers...)
		r.Kind, r.Reused = OpReuse, c.Op
		return r
	}
	refused := Attempt{Status: 422, Body: []byte(`{"type":"key-reused"}`)}
	cases := []struct {
		name  string
		setup func() ([]*Command, *dbState, []Attempt)
		field func(*Verdict) int
	}{
		{"SecondRowUnderKey", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			st.rows["d2"] = businessRow{user: "alice", id: "d2", kind: "deposit", key: str("q-1"), src: "USD", amount: 100_51}
			st.entries["d2"] = []entryRow{{"USD", 100_51}}
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDouble }},
		{"RowNoCommandAskedFor", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			st.rows["d2"] = businessRow{user: "alice", id: "d2", kind: "deposit", key: str("q-9"), src: "USD", amount: 700_51}
			st.entries["d2"] = []entryRow{{"USD", 700_51}}
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDouble }},
		{"LedgerTwice", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			st.entries["d1"] = append(st.entries["d1"], entryRow{"USD", 100_51})
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDouble }},
		{"AcknowledgedNeverRan", func() ([]*Command, *dbState, []Attempt) {
			c := queued(alice, "q-1", 100_51)
			return []*Command{c}, &dbState{keys: map[userKey]keyRow{}, rows: map[string]businessRow{}}, nil
		}, func(v *Verdict) int { return v.QueueLost }},
		{"StoredCreatedWithoutRow", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			c.Attempts = nil
			delete(st.rows, "d1")
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueLost }},
		{"AnsweredRowMissing", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			st.rows["d1"] = businessRow{user: "alice", id: "d9", kind: "deposit", key: str("q-1"), src: "USD", amount: 100_51}
			delete(st.rows, "d1")
			st.rows["d9"] = businessRow{user: "alice", id: "d9", kind: "deposit", key: str("q-1"), src: "USD", amount: 100_51}
			st.entries["d9"] = []entryRow{{"USD", 100_51}}
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueLost }},
		{"NoAnswer", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			c.Attempts = []Attempt{{Status: 503}, {Status: 409, RetryAfter: "1"}}
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueUnanswered }},
		{"AnswerUnlikeRecord", func() ([]*Command, *dbState, []Attempt) {
			c, st, a := healthy()
			st.keys[userKey{"alice", "q-1"}] = keyRow{status: "COMPLETED", code: code(201), body: append([]byte(" "), a.Body...)}
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDisagree }},
		{"LaterAnswerDiffers", func() ([]*Command, *dbState, []Attempt) {
			c, st, a := healthy()
			c.Attempts = append(c.Attempts, Attempt{Status: 201, Replayed: true, Body: append(a.Body, ' ')})
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDisagree }},
		{"ExecutedTwice", func() ([]*Command, *dbState, []Attempt) {
			c, st, a := healthy()
			c.Attempts = append(c.Attempts, a)
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDisagree }},
		{"ResultsSubjectDiffers", func() ([]*Command, *dbState, []Attempt) {
			c, st, a := healthy()
			return []*Command{c}, st, []Attempt{{Status: 201, Body: append(a.Body, ' ')}}
		}, func(v *Verdict) int { return v.QueueDisagree }},
		{"MovedBehind402", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			poor := Attempt{Status: 402, Body: []byte(`{"type":"insufficient-funds"}`)}
			c.Attempts = []Attempt{poor}
			st.keys[userKey{"alice", "q-1"}] = keyRow{status: "COMPLETED", code: code(402), body: poor.Body}
			return []*Command{c}, st, nil
		}, func(v *Verdict) int { return v.QueueDisagree }},
		{"OtherBodyMoved", func() ([]*Command, *dbState, []Attempt) {
			c, st, _ := healthy()
			st.rows["d2"] = businessRow{user: "alice", id: "d2", kind: "deposit", src: "USD", amount: 999_51}
			st.entries["d2"] = []entryRow{{"USD", 999_51}}
			return []*Command{c, reuse(c, refused)}, st, nil
		}, func(v *Verdict) int { return v.QueueOtherBody }},
		{"OtherBodyReplayed", func() ([]*Command, *dbState, []Attempt) {
			c, st, a := healthy()
			return []*Command{c, reuse(c, Attempt{Status: 201, Replayed: true, Body: a.Body})}, st, nil
		}, func(v *Verdict) int { return v.QueueOtherBody }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmds, st, results := c.setup()
			v := checkQueued(cmds, st, results...)
			require.True(t, v.Failed())
			require.Positive(t, c.field(v), "counted elsewhere: %v", v.Details)
		})
	}
}

// The HTTP checks see their own users only: another door's rows would be
// effects no caller asked for.
func TestStateOnly(t *testing.T) {
	t.Parallel()
	alice, bob := &User{ID: "alice"}, &User{ID: "bob"}
	a := created("d1", 100_01, false)
	op := depositOp(alice, "op-1", 100_01)
	op.Attempts = []Attempt{a}
	st := state(alice, "op-1", "d1", 100_01, a.Body)
	st.keys[userKey{"bob", "q-1"}] = keyRow{status: "COMPLETED", code: code(201), body: []byte(`{}`)}
	st.rows["d2"] = businessRow{user: "bob", id: "d2", kind: "deposit", key: str("q-1"), src: "USD", amount: 100_51}
	st.entries["d2"] = []entryRow{{"USD", 100_51}}
	require.True(t, check([]*Op{op}, st).Failed(), "bob's row is unasked for by alice's ops")
	v := check([]*Op{op}, st.only([]*User{alice}))
	require.False(t, v.Failed(), "%v", v.Details)
	require.Equal(t, 1, len(st.only([]*User{bob}).rows))
}
