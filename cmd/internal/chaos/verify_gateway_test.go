package chaos

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// effectOp is a request of u to upstream route ("dedup" or "plain").
func effectOp(u *User, route, key string, amount int64) *Op {
	return &Op{User: u, Key: key, Kind: OpEffect, Path: "/" + route + "/effects", Scenario: "sdk",
		Body: fmt.Appendf(nil, `{"ref":"%s-%s","amount":%d}`, u.ID, key, amount)}
}

func effectCreated(op *Op, id string, replayed bool) Attempt {
	return Attempt{Status: 201, Replayed: replayed, Body: fmt.Appendf(nil, `{"id":%q,"ref":"%s-%s","amount":%s}`+"\n", id, op.User.ID, op.Key, amountOf(op))}
}

func amountOf(op *Op) string {
	var req effectRequest
	_ = json.Unmarshal(op.Body, &req)
	return fmt.Sprint(req.Amount)
}

var unknownAnswer = Attempt{Status: 409, Body: []byte(`{"type":"https://github.com/idem-dev/idem/blob/main/docs/problems.md#outcome-unknown","status":409}` + "\n")}

// gwTrace is a healthy gateway run: alice's dedup request answered 201
// after a 502; bob's plain request answered outcome-unknown after the
// upstream acted (slow answer), resolved with that answer and replayed;
// carol's plain request unknown without an effect (hung), reopened, run
// again after the resolve.
type gwTrace struct {
	ops           []*Op
	before, final *gatewayState
	res           *resolutions
	after         map[userKey]*Op
}

func healthyGateway() *gwTrace {
	alice, bob, carol := &User{ID: "alice", APIKey: "ka"}, &User{ID: "bob", APIKey: "kb"}, &User{ID: "carol", APIKey: "kc"}
	a, b, c := effectOp(alice, "dedup", "op-1", 1001), effectOp(bob, "plain", "op-1", 1002), effectOp(carol, "plain", "op-1", 1003)
	aOK := effectCreated(a, "eff_1", false)
	a.Attempts = []Attempt{{Status: 502}, aOK, {Err: "timeout"}, effectCreated(a, "eff_1", true)}
	b.Attempts = []Attempt{unknownAnswer, {Status: 409, Replayed: true, Body: unknownAnswer.Body}}
	c.Attempts = []Attempt{{Err: "dropped by the client"}, unknownAnswer}
	fwd := func(op *Op) string { return forwardedKey(gatewayScope(op.User), op.Key) }
	rec := func(at Attempt) keyRow {
		return keyRow{status: "COMPLETED", code: code(int32(at.Status)), body: at.Body}
	}
	st := func() *gatewayState {
		return &gatewayState{
			records: map[userKey]keyRow{
				{gatewayScope(alice), "op-1"}: rec(aOK), {gatewayScope(bob), "op-1"}: rec(unknownAnswer), {gatewayScope(carol), "op-1"}: rec(unknownAnswer),
			},
			effects: map[userKey][]effectAnswer{
				{"dedup", fwd(a)}: {{"eff_1", "alice-op-1", 1001}},
				{"plain", fwd(b)}: {{"eff_2", "bob-op-1", 1002}},
			},
			arrivals: []upstreamArrival{
				{Key: fwd(b), Arrived: 1, Finished: 3, Outcome: "executed", Fault: "slow-after"},
				{Key: fwd(c), Arrived: 2, Finished: 5, Outcome: "refused", Fault: "error-before"},
				{Key: fwd(c), Arrived: 6, Finished: 8, Outcome: "dropped", Fault: "hang"},
			},
		}
	}
	before, final := st(), st()
	bAnswer := effectCreated(b, "eff_2", false).Body
	bAfter := &Op{User: bob, Key: b.Key, Kind: OpEffect, Path: b.Path, Body: b.Body,
		Attempts: []Attempt{{Status: 201, Replayed: true, Body: bAnswer}, {Status: 201, Replayed: true, Body: bAnswer}}}
	cOK := effectCreated(c, "eff_3", false)
	cAfter := &Op{User: carol, Key: c.Key, Kind: OpEffect, Path: c.Path, Body: c.Body,
		Attempts: []Attempt{cOK, effectCreated(c, "eff_3", true)}}
	final.records[userKey{gatewayScope(bob), "op-1"}] = keyRow{status: "COMPLETED", code: code(201), body: bAnswer}
	final.records[userKey{gatewayScope(carol), "op-1"}] = rec(cOK)
	final.effects[userKey{"plain", fwd(c)}] = []effectAnswer{{"eff_3", "carol-op-1", 1003}}
	final.arrivals = append(final.arrivals, upstreamArrival{Key: fwd(c), Arrived: 9, Finished: 10, Outcome: "executed"})
	res := &resolutions{
		listed:   []userKey{{gatewayScope(bob), "op-1"}, {gatewayScope(carol), "op-1"}},
		of:       map[userKey][]byte{{gatewayScope(bob), "op-1"}: bAnswer, {gatewayScope(carol), "op-1"}: nil},
		answered: 1,
	}
	return &gwTrace{ops: []*Op{a, b, c}, before: before, final: final, res: res,
		after: map[userKey]*Op{{"bob", "op-1"}: bAfter, {"carol", "op-1"}: cAfter}}
}

func (tr *gwTrace) check() *Verdict {
	v := &Verdict{Gateway: &GatewayVerdict{}}
	checkGateway(v, tr.ops, tr.before, tr.final, tr.res, tr.after)
	return v
}

func TestVerifyGatewayHealthy(t *testing.T) {
	t.Parallel()
	v := healthyGateway().check()
	require.False(t, v.Failed(), "%v", v.Details)
	g := v.Gateway
	require.Equal(t, 1, g.Dedup)
	require.Equal(t, 2, g.Plain)
	require.Equal(t, 3, g.Executions)
	require.Equal(t, 2, g.Unknown)
	require.Equal(t, 1, g.Answered)
	require.Equal(t, 1, g.Reopened)
}

func TestVerifyGatewayCatches(t *testing.T) {
	t.Parallel()
	fwd := func(tr *gwTrace, i int) string { return forwardedKey(gatewayScope(tr.ops[i].User), tr.ops[i].Key) }
	cases := []struct {
		name  string
		spoil func(tr *gwTrace)
		field func(*GatewayVerdict) int
	}{
		{"DedupUpstreamActedTwice", func(tr *gwTrace) {
			k := userKey{"dedup", fwd(tr, 0)}
			tr.final.effects[k] = append(tr.final.effects[k], effectAnswer{"eff_9", "alice-op-1", 1001})
		}, func(g *GatewayVerdict) int { return g.Twice }},
		{"PlainUpstreamRanAgain", func(tr *gwTrace) {
			k := userKey{"plain", fwd(tr, 1)}
			tr.final.effects[k] = append(tr.final.effects[k], effectAnswer{"eff_9", "bob-op-1", 1002})
		}, func(g *GatewayVerdict) int { return g.Twice }},
		{"ResentAfterSlowAnswer", func(tr *gwTrace) {
			tr.before.arrivals = append(tr.before.arrivals, upstreamArrival{Key: fwd(tr, 1), Arrived: 7, Finished: 8, Outcome: "refused"})
			tr.final.arrivals = append(tr.before.arrivals[:len(tr.before.arrivals):len(tr.before.arrivals)], tr.final.arrivals[3:]...)
		}, func(g *GatewayVerdict) int { return g.Resent }},
		{"ResentWhileRefusalInFlight", func(tr *gwTrace) {
			tr.before.arrivals[1].Finished = 7 // the refusal ended after the next send arrived
		}, func(g *GatewayVerdict) int { return g.Resent }},
		{"ResentAfterAnsweredResolve", func(tr *gwTrace) {
			tr.final.arrivals = append(tr.final.arrivals, upstreamArrival{Key: fwd(tr, 1), Arrived: 11, Finished: 12, Outcome: "executed"})
		}, func(g *GatewayVerdict) int { return g.Resent }},
		{"ReopenedSentTwice", func(tr *gwTrace) {
			tr.final.arrivals = append(tr.final.arrivals, upstreamArrival{Key: fwd(tr, 2), Arrived: 11, Finished: 12, Outcome: "executed"})
		}, func(g *GatewayVerdict) int { return g.Resent }},
		{"NoFinalAnswer", func(tr *gwTrace) {
			tr.ops[0].Attempts = []Attempt{{Status: 502}, {Status: 409, RetryAfter: "1"}}
		}, func(g *GatewayVerdict) int { return g.NotFinal }},
		{"FinalNeitherCreatedNorUnknown", func(tr *gwTrace) {
			bad := Attempt{Status: 422, Body: []byte(`{}`)}
			tr.ops[0].Attempts = []Attempt{bad}
			tr.before.records[userKey{gatewayScope(tr.ops[0].User), "op-1"}] = keyRow{status: "COMPLETED", code: code(422), body: bad.Body}
		}, func(g *GatewayVerdict) int { return g.NotFinal }},
		{"RecordUnfinished", func(tr *gwTrace) {
			tr.before.records[userKey{gatewayScope(tr.ops[0].User), "op-1"}] = keyRow{status: "PROCESSING"}
		}, func(g *GatewayVerdict) int { return g.NotFinal }},
		{"AnswerUnlikeRecord", func(tr *gwTrace) {
			k := userKey{gatewayScope(tr.ops[0].User), "op-1"}
			r := tr.before.records[k]
			r.body = append([]byte(" "), r.body...)
			tr.before.records[k] = r
		}, func(g *GatewayVerdict) int { return g.Disagree }},
		{"LaterAnswerDiffers", func(tr *gwTrace) {
			tr.ops[0].Attempts = append(tr.ops[0].Attempts, effectCreated(tr.ops[0], "eff_7", true))
		}, func(g *GatewayVerdict) int { return g.Disagree }},
		{"CreatedWithoutEffect", func(tr *gwTrace) {
			delete(tr.before.effects, userKey{"dedup", fwd(tr, 0)})
		}, func(g *GatewayVerdict) int { return g.Disagree }},
		{"UnknownOnDedupRoute", func(tr *gwTrace) {
			tr.ops[0].Attempts = []Attempt{unknownAnswer}
			tr.before.records[userKey{gatewayScope(tr.ops[0].User), "op-1"}] = keyRow{status: "COMPLETED", code: code(409), body: unknownAnswer.Body}
		}, func(g *GatewayVerdict) int { return g.Disagree }},
		{"EffectNoRequestNames", func(tr *gwTrace) {
			tr.final.effects[userKey{"plain", "f00"}] = []effectAnswer{{"eff_8", "x", 1}}
		}, func(g *GatewayVerdict) int { return g.Disagree }},
		{"ResolvedAnswerNotReplayed", func(tr *gwTrace) {
			tr.after[userKey{"bob", "op-1"}].Attempts[1] = unknownAnswer // a replica replayed a stale copy
		}, func(g *GatewayVerdict) int { return g.Unresolved }},
		{"ResolvedAnswerDiffers", func(tr *gwTrace) {
			again := tr.after[userKey{"bob", "op-1"}]
			for i := range again.Attempts {
				again.Attempts[i].Body = append([]byte(" "), again.Attempts[i].Body...)
			}
		}, func(g *GatewayVerdict) int { return g.Unresolved }},
		{"ReopenedRetryNotRun", func(tr *gwTrace) {
			again := tr.after[userKey{"carol", "op-1"}]
			again.Attempts[0].Replayed = true
		}, func(g *GatewayVerdict) int { return g.Unresolved }},
		{"UnknownNotListed", func(tr *gwTrace) {
			tr.res.listed = tr.res.listed[:1]
			delete(tr.res.of, userKey{gatewayScope(tr.ops[2].User), "op-1"})
		}, func(g *GatewayVerdict) int { return g.Unresolved }},
		{"ListedNotTold", func(tr *gwTrace) {
			tr.res.listed = append(tr.res.listed, userKey{gatewayScope(tr.ops[0].User), "op-1"})
		}, func(g *GatewayVerdict) int { return g.Unresolved }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := healthyGateway()
			tc.spoil(tr)
			v := tr.check()
			require.True(t, tc.field(v.Gateway) > 0, "not counted where the table says; details: %v", v.Details)
			require.True(t, v.Failed())
		})
	}
}
