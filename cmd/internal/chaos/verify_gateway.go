package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// GatewayVerdict is what the gateway phase's checks found. The fields
// marked must-be-0 fail the run.
type GatewayVerdict struct {
	Dedup, Plain       int // requests (a key and its body) to each upstream
	Executions         int // effects the upstreams recorded
	UpstreamFaults     int // faults the upstreams injected
	Unknown            int // keys whose callers were answered outcome-unknown
	Answered, Reopened int // how the operator resolved them
	Twice              int // must be 0: a forwarded key with more than one effect upstream
	Resent             int // must be 0: a key the non-dedup upstream received again after an attempt that may have acted
	NotFinal           int // must be 0: a key neither final nor outcome-unknown after the quiet period
	Disagree           int // must be 0: answers that differ from each other, the gateway's record or the upstream's effect
	Unresolved         int // must be 0: after the operator's resolve, a retry that does not get the recorded answer
}

func (g *GatewayVerdict) invariants() []int {
	return []int{g.Twice, g.Resent, g.NotFinal, g.Disagree, g.Unresolved}
}

// gatewayState is what the gateway's key table and the upstreams hold.
type gatewayState struct {
	records  map[userKey]keyRow         // by scope and key
	effects  map[userKey][]effectAnswer // by upstream name and forwarded key
	arrivals []upstreamArrival          // what the non-dedup upstream received, in order
	faults   int                        // faults both upstreams injected
	open     map[userKey]string         // records unfinished after the quiet period, by scope and key
}

// upstreamArrival is the upstream's record of one request it received
// (cmd/internal/chaos/upstream's Arrival).
type upstreamArrival struct {
	Key      string `json:"key"`
	Ref      string `json:"ref"`
	Arrived  int64  `json:"arrived"`
	Finished int64  `json:"finished"`
	Outcome  string `json:"outcome"`
	Fault    string `json:"fault"`
}

func loadGatewayState(ctx context.Context, db *pgxpool.Pool, ups map[string]*upstreamProc) (*gatewayState, error) {
	st := &gatewayState{effects: map[userKey][]effectAnswer{}}
	var err error
	if st.records, err = loadKeys(ctx, db); err != nil {
		return nil, err
	}
	err = each(ctx, db, `SELECT upstream, idempotency_key, 'eff_' || id, ref, amount FROM upstream_effects ORDER BY id`,
		func(r pgx.Rows) error {
			var k userKey
			var e effectAnswer
			if err := r.Scan(&k.user, &k.key, &e.ID, &e.Ref, &e.Amount); err != nil {
				return err
			}
			st.effects[k] = append(st.effects[k], e)
			return nil
		})
	if err != nil {
		return nil, err
	}
	var dedup []upstreamArrival
	if err := ups["dedup"].call(ctx, http.MethodGet, "/arrivals", &dedup); err != nil {
		return nil, err
	}
	if err := ups["plain"].call(ctx, http.MethodGet, "/arrivals", &st.arrivals); err != nil {
		return nil, err
	}
	for _, a := range append(dedup, st.arrivals...) {
		if a.Fault != "" {
			st.faults++
		}
	}
	return st, nil
}

// routeOf is the upstream an op's path goes to.
func routeOf(op *Op) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(op.Path, "/"), "/")
	return name
}

// isOutcomeUnknown reports whether a is the gateway's outcome-unknown answer.
func isOutcomeUnknown(a Attempt) bool {
	return a.Status == http.StatusConflict && problemName(a.Body) == "outcome-unknown"
}

// checkGateway checks the callers' answers against each other, the
// gateway's records (before the operator's resolve) and the upstreams'
// effects; the upstreams' effects and arrivals; and the retries after the
// resolve (after, by user and key) against what the operator recorded.
func checkGateway(v *Verdict, ops []*Op, before, final *gatewayState, res *resolutions, after map[userKey]*Op) {
	g := v.Gateway
	g.UpstreamFaults = final.faults
	byForwarded := map[userKey]*Op{} // by upstream and forwarded key
	told := map[userKey]bool{}       // outcome-unknown, by scope and key
	for _, op := range ops {
		scope, route := gatewayScope(op.User), routeOf(op)
		byForwarded[userKey{route, forwardedKey(scope, op.Key)}] = op
		if route == "dedup" {
			g.Dedup++
		} else {
			g.Plain++
		}
		if checkGatewayAnswers(v, op, before) {
			told[userKey{scope, op.Key}] = true
		}
	}
	for k, es := range final.effects {
		g.Executions += len(es)
		if len(es) > 1 {
			v.fail(&g.Twice, "upstream %s executed forwarded key %s %d times: %+v", k.user, k.key, len(es), es)
		}
		if byForwarded[k] == nil {
			v.fail(&g.Disagree, "upstream %s has effects %+v under key %s, which no request was forwarded with", k.user, es, k.key)
		}
	}
	checkResent(v, before.arrivals, final.arrivals[len(before.arrivals):], byForwarded, res)
	checkResolved(v, ops, told, final, res, after)
}

// checkGatewayAnswers checks one op's answers before the resolve and
// reports whether its callers were told outcome-unknown.
func checkGatewayAnswers(v *Verdict, op *Op, st *gatewayState) bool {
	g := v.Gateway
	scope, route := gatewayScope(op.User), routeOf(op)
	final, ok := op.FinalAnswer()
	if !ok {
		v.fail(&g.NotFinal, "user %s key %s (%s, %s): no final answer; last: %s", op.User.ID, op.Key, route, op.Scenario, summary(op.Answers()))
		return false
	}
	unknown := isOutcomeUnknown(final)
	if final.Status != http.StatusCreated && !unknown {
		v.fail(&g.NotFinal, "user %s key %s (%s, %s): final answer %d %q, neither 201 nor outcome-unknown", op.User.ID, op.Key, route, op.Scenario, final.Status, final.Body)
		return false
	}
	if unknown && route == "dedup" {
		v.fail(&g.Disagree, "user %s key %s: answered outcome-unknown on the route whose upstream deduplicates", op.User.ID, op.Key)
	}
	for _, a := range op.Answers() {
		if a.Final() && (a.Status != final.Status || !bytes.Equal(a.Body, final.Body)) {
			v.fail(&g.Disagree, "user %s key %s (%s, %s) answered %d %q and later %d %q", op.User.ID, op.Key, route, op.Scenario, final.Status, final.Body, a.Status, a.Body)
			break
		}
	}
	rec, ok := st.records[userKey{scope, op.Key}]
	switch {
	case !ok || rec.status != "COMPLETED" || rec.code == nil:
		v.fail(&g.NotFinal, "user %s key %s was answered %d, but after the quiet period its record is %+v (unfinished: %q)", op.User.ID, op.Key, final.Status, rec, st.open[userKey{scope, op.Key}])
	case int(*rec.code) != final.Status || !bytes.Equal(rec.body, final.Body):
		v.fail(&g.Disagree, "user %s key %s was answered %d %q, but its record holds %d %q", op.User.ID, op.Key, final.Status, final.Body, *rec.code, rec.body)
	}
	if final.Status == http.StatusCreated {
		if err := effectOf(st, op, final.Body); err != nil {
			v.fail(&g.Disagree, "user %s key %s: %v", op.User.ID, op.Key, err)
		}
	}
	return unknown
}

// effectOf checks that body, a 201, names an effect the op's upstream
// recorded under the op's forwarded key, for the op's request.
func effectOf(st *gatewayState, op *Op, body []byte) error {
	var got effectAnswer
	var req effectRequest
	if err := json.Unmarshal(body, &got); err != nil {
		return fmt.Errorf("201 body %q: %v", body, err)
	}
	_ = json.Unmarshal(op.Body, &req)
	if got.Ref != req.Ref || got.Amount != req.Amount {
		return fmt.Errorf("asked for %s, answered %s", op.Body, body)
	}
	k := userKey{routeOf(op), forwardedKey(gatewayScope(op.User), op.Key)}
	if !slices.Contains(st.effects[k], got) {
		return fmt.Errorf("answered %s, but upstream %s holds %+v under its forwarded key", body, k.user, st.effects[k])
	}
	return nil
}

// checkResent finds keys the non-dedup upstream received again after an
// attempt that may have acted: any attempt but one it refused (5xx,
// nothing done) before the next arrived. During the traffic (during) no
// key may arrive twice so; after the operator's resolve (later) only a
// reopened key may arrive, once.
func checkResent(v *Verdict, during, later []upstreamArrival, byForwarded map[userKey]*Op, res *resolutions) {
	g := v.Gateway
	byKey := map[string][]upstreamArrival{}
	for _, a := range during {
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		as := byKey[k]
		sort.Slice(as, func(i, j int) bool { return as[i].Arrived < as[j].Arrived })
	next:
		for j := 1; j < len(as); j++ {
			for _, a := range as[:j] {
				if a.Outcome != "refused" || a.Finished > as[j].Arrived {
					v.fail(&g.Resent, "key %s (%s) reached the non-dedup upstream again after an attempt that may have acted: %+v", k, ref(byForwarded, k), as)
					break next
				}
			}
		}
	}
	seen := map[string]int{}
	for _, a := range later {
		seen[a.Key]++
		op := byForwarded[userKey{"plain", a.Key}]
		reopened := false
		if op != nil {
			body, ok := res.of[userKey{gatewayScope(op.User), op.Key}]
			reopened = ok && body == nil
		}
		if !reopened || seen[a.Key] > 1 {
			v.fail(&g.Resent, "key %s (%s) reached the non-dedup upstream after the operator's resolve (reopened: %v, time %d): %+v", a.Key, ref(byForwarded, a.Key), reopened, seen[a.Key], a)
		}
	}
}

func ref(byForwarded map[userKey]*Op, key string) string {
	if op := byForwarded[userKey{"plain", key}]; op != nil {
		return op.User.ID + " " + op.Key
	}
	return "no request"
}

// checkResolved checks the operator's view against the callers' (the
// keys listed unknown are those answered so) and the retries after each
// resolve: an answered key replays the recorded answer, byte for byte, on
// every replica; a reopened one runs once more, then replays that.
func checkResolved(v *Verdict, ops []*Op, told map[userKey]bool, final *gatewayState, res *resolutions, after map[userKey]*Op) {
	g := v.Gateway
	g.Unknown, g.Answered, g.Reopened = len(told), res.answered, len(res.of)-res.answered
	for _, k := range res.listed {
		if !told[k] {
			v.fail(&g.Unresolved, "keys list shows %s in scope %s unknown; its callers were not told so", k.key, k.user)
		}
	}
	for _, op := range ops {
		k := userKey{gatewayScope(op.User), op.Key}
		if !told[k] {
			continue
		}
		recorded, ok := res.of[k]
		again := after[userKey{op.User.ID, op.Key}]
		if !ok || again == nil {
			v.fail(&g.Unresolved, "user %s key %s was answered outcome-unknown, but keys list did not show it", op.User.ID, op.Key)
			continue
		}
		var finals []Attempt
		for _, a := range again.Answers() {
			if a.Final() {
				finals = append(finals, a)
			}
		}
		if len(finals) < 2 {
			v.fail(&g.Unresolved, "user %s key %s: after the resolve, %d final answers to 2 sends: %s", op.User.ID, op.Key, len(finals), summary(again.Answers()))
			continue
		}
		first := finals[0]
		for i, a := range finals {
			switch {
			case a.Status != http.StatusCreated || !bytes.Equal(a.Body, first.Body):
				v.fail(&g.Unresolved, "user %s key %s: after the resolve, answered %d %q then %d %q", op.User.ID, op.Key, first.Status, first.Body, a.Status, a.Body)
			case recorded != nil && (!bytes.Equal(a.Body, recorded) || !a.Replayed):
				v.fail(&g.Unresolved, "user %s key %s: the operator recorded %q; a retry got %q (replayed %v)", op.User.ID, op.Key, recorded, a.Body, a.Replayed)
			case recorded == nil && a.Replayed != (i > 0):
				v.fail(&g.Unresolved, "user %s key %s: reopened, retry %d answered with replayed %v", op.User.ID, op.Key, i+1, a.Replayed)
			default:
				continue
			}
			break
		}
		if recorded == nil && first.Status == http.StatusCreated {
			if err := effectOf(final, op, first.Body); err != nil {
				v.fail(&g.Unresolved, "user %s key %s, reopened and run again: %v", op.User.ID, op.Key, err)
			}
		}
		if rec := final.records[k]; rec.code == nil || int(*rec.code) != first.Status || !bytes.Equal(rec.body, first.Body) {
			v.fail(&g.Unresolved, "user %s key %s: after the resolve, answered %d %q, its record holds %+v", op.User.ID, op.Key, first.Status, first.Body, rec)
		}
	}
}

// gatewayRows are the gateway phase's rows of the table; "-" in the
// columns of the idempotency modes.
func gatewayRows(row func(string, func(*Result) string)) {
	g := func(f func(*GatewayVerdict) string) func(*Result) string {
		return func(r *Result) string {
			if r.Verdict == nil || r.Verdict.Gateway == nil {
				return "-"
			}
			return f(r.Verdict.Gateway)
		}
	}
	n := func(f func(*GatewayVerdict) int) func(*Result) string {
		return g(func(v *GatewayVerdict) string { return fmt.Sprint(f(v)) })
	}
	row("gateway: requests (a key and its body), dedup / plain upstream", g(func(v *GatewayVerdict) string { return fmt.Sprintf("%d / %d", v.Dedup, v.Plain) }))
	row("  effects upstream / upstream faults injected", g(func(v *GatewayVerdict) string { return fmt.Sprintf("%d / %d", v.Executions, v.UpstreamFaults) }))
	row("  answered outcome-unknown", n(func(v *GatewayVerdict) int { return v.Unknown }))
	row("  resolved by keys resolve: answered / reopened", g(func(v *GatewayVerdict) string { return fmt.Sprintf("%d / %d", v.Answered, v.Reopened) }))
	row("gateway: executed twice upstream (must be 0)", n(func(v *GatewayVerdict) int { return v.Twice }))
	row("gateway: re-sent after an unknown outcome (must be 0)", n(func(v *GatewayVerdict) int { return v.Resent }))
	row("gateway: neither final nor outcome-unknown (must be 0)", n(func(v *GatewayVerdict) int { return v.NotFinal }))
	row("gateway: answers unlike the record (must be 0)", n(func(v *GatewayVerdict) int { return v.Disagree }))
	row("gateway: retries unlike the resolution (must be 0)", n(func(v *GatewayVerdict) int { return v.Unresolved }))
}
