package chaos

import (
	"bytes"
	"context"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
)

// only is s cut down to the keys, business rows and balances of users, so
// that the checks of one door do not see another door's users.
func (s *dbState) only(users []*User) *dbState {
	ids := map[string]bool{}
	for _, u := range users {
		ids[u.ID] = true
	}
	out := &dbState{keys: map[userKey]keyRow{}, rows: map[string]businessRow{}, entries: s.entries,
		balances: map[userCur]int64{}, sums: map[userCur]int64{}}
	for k, r := range s.keys {
		if ids[k.user] {
			out.keys[k] = r
		}
	}
	for id, r := range s.rows {
		if ids[r.user] {
			out.rows[id] = r
		}
	}
	for k, a := range s.balances {
		if ids[k.user] {
			out.balances[k] = a
		}
	}
	for k, a := range s.sums {
		if ids[k.user] {
			out.sums[k] = a
		}
	}
	return out
}

// Verify reads every answer back from the broker and checks the queue
// phase's invariants against the database, counting into v.
func (q *Queue) Verify(ctx context.Context, db *pgxpool.Pool, v *Verdict) error {
	if q == nil {
		return nil
	}
	if err := q.Collect(ctx); err != nil {
		return err
	}
	st, err := loadState(ctx, db)
	if err != nil {
		return err
	}
	users := make([]*User, len(q.Producers))
	for i, p := range q.Producers {
		users[i] = p.User
	}
	checkQueue(v, st.only(users), q.Commands(), q.resultKey, q.results)
	return nil
}

// checkQueue checks the queue commands against the database (cut to their
// users) and against every answer published: to each command's reply
// subject (its Attempts) and to payments.results (results, keyed by
// resultKeys).
func checkQueue(v *Verdict, st *dbState, cmds []*Command, resultKeys []string, results []Attempt) {
	v.QueueCommands += len(cmds)
	owner := map[userKey]*Command{} // the command a key's record answers
	for _, c := range cmds {
		if c.Kind != OpReuse {
			owner[userKey{c.User.ID, c.Key}] = c
		}
	}
	effects := map[businessRow]bool{} // the requests that took effect
	for _, r := range st.rows {
		effects[businessRow{user: r.user, kind: r.kind, src: r.src, dst: r.dst, amount: r.amount}] = true
	}
	for _, c := range cmds {
		checkCommand(v, st, effects, c)
	}
	checkQueueRows(v, st, cmds, owner)
	// payments.results carries the same answers as the reply subjects.
	replies := map[string][]Attempt{}
	for _, c := range cmds {
		replies[c.Key] = append(replies[c.Key], c.Answers()...)
	}
	for i, r := range results {
		twin := slices.ContainsFunc(replies[resultKeys[i]], func(a Attempt) bool {
			return a.Status == r.Status && bytes.Equal(a.Body, r.Body)
		})
		if !twin {
			v.fail(&v.QueueDisagree, "payments.results: key %s answered %d %q, which no command's reply subject got", resultKeys[i], r.Status, r.Body)
		}
	}
}

// checkCommand checks one command's answers against each other, its
// request, and the database.
func checkCommand(v *Verdict, st *dbState, effects map[businessRow]bool, c *Command) {
	final, ok := c.FinalAnswer()
	rec, stored := st.keys[userKey{c.User.ID, c.Key}]
	refused := stored && rec.status == "COMPLETED" && rec.code != nil && *rec.code/100 != 2
	if c.Kind != OpReuse && c.Acked() > 0 && !hasEffect(effects, c) && !refused {
		v.fail(&v.QueueLost, "queue key %s of user %s (%s, fire-once %t): JetStream acknowledged it %d times; no effect, no final refusal stored (record %+v)",
			c.Key, c.User.ID, c.Kind, c.FireOnce, c.Acked(), rec)
	}
	if !ok {
		v.fail(&v.QueueUnanswered, "queue key %s of user %s (%s, fire-once %t, %d publishes acknowledged): no final answer published; answers %d",
			c.Key, c.User.ID, c.Kind, c.FireOnce, c.Acked(), len(c.Answers()))
		return
	}
	executions := 0
	for _, a := range c.Answers() {
		if !a.Final() {
			continue
		}
		if !a.Replayed && c.Kind != OpReuse {
			executions++
		}
		if a.Status != final.Status || !bytes.Equal(a.Body, final.Body) {
			v.fail(&v.QueueDisagree, "queue key %s of user %s answered %d %q and later %d %q", c.Key, c.User.ID, final.Status, final.Body, a.Status, a.Body)
		}
		// A 422 is not stored: the record is the first body's answer.
		if c.Kind != OpReuse && (!stored || rec.code == nil || int(*rec.code) != a.Status || !bytes.Equal(rec.body, a.Body)) {
			v.fail(&v.QueueDisagree, "queue key %s of user %s answered %d %q, but its record is %+v",
				c.Key, c.User.ID, a.Status, a.Body, rec)
		}
	}
	if executions > 1 {
		v.fail(&v.QueueDisagree, "queue key %s of user %s was answered as executed, not replayed, %d times", c.Key, c.User.ID, executions)
	}
	want := map[OpKind][]int{OpDeposit: {http.StatusCreated}, OpTransaction: {http.StatusCreated, http.StatusPaymentRequired},
		OpReuse: {http.StatusUnprocessableEntity}}[c.Kind]
	if c.Scenario == "queue-402" {
		want = []int{http.StatusPaymentRequired}
	}
	if !slices.Contains(want, final.Status) {
		counter := &v.QueueDisagree
		if c.Kind == OpReuse && final.Status/100 == 2 {
			counter = &v.QueueOtherBody
		}
		v.fail(counter, "queue key %s of user %s (%s): final answer %d %q, want one of %v", c.Key, c.User.ID, c.Kind, final.Status, final.Body, want)
	}
	if c.Kind == OpReuse {
		if hasEffect(effects, c) {
			v.fail(&v.QueueOtherBody, "queue key %s of user %s: its second body %s moved money", c.Key, c.User.ID, c.Body)
		}
		return
	}
	if final.Status/100 != 2 {
		return
	}
	row, err := describe(c.Op, final.Body)
	if err == nil {
		err = matchesRequest(c.Op, row)
	}
	if err != nil {
		v.fail(&v.QueueDisagree, "queue key %s of user %s: the 2xx %q does not answer %s: %v", c.Key, c.User.ID, final.Body, c.Body, err)
		return
	}
	got, ok := st.rows[row.id]
	switch {
	case !ok:
		v.fail(&v.QueueLost, "queue key %s of user %s was answered %s %s, which the database does not hold", c.Key, c.User.ID, row.kind, row.id)
	case got.user != row.user || got.kind != row.kind || got.src != row.src || got.dst != row.dst ||
		got.amount != row.amount || got.converted != row.converted || got.key == nil || *got.key != c.Key:
		v.fail(&v.QueueDisagree, "queue key %s of user %s was answered %+v, the database holds %+v", c.Key, c.User.ID, row, got)
	}
}

// hasEffect reports whether a business row of c's user is c's request: its
// amount is the user's only one. A reused key's request is read by its path.
func hasEffect(effects map[businessRow]bool, c *Command) bool {
	kind := OpTransaction
	if c.Path == "/v1/deposits" {
		kind = OpDeposit
	}
	sig, err := signature(&Op{User: c.User, Kind: kind, Body: c.Body})
	return err == nil && effects[sig]
}

// checkQueueRows finds keys with more than one effect, effects that are not
// exactly their own amounts, effects no command asked for, and effects
// behind an answer that said nothing moved.
func checkQueueRows(v *Verdict, st *dbState, cmds []*Command, owner map[userKey]*Command) {
	byKey := map[userKey][]string{}
	for _, id := range st.rowIDs() {
		row := st.rows[id]
		if !entriesMatch(row, st.entries[id]) {
			v.fail(&v.QueueDouble, "%s %s of user %s moved balances %+v; it should move exactly its own amounts", row.kind, id, row.user, st.entries[id])
		}
		if row.key == nil || owner[userKey{row.user, *row.key}] == nil {
			v.fail(&v.QueueDouble, "%s %s of user %s (%+v) moved money, but no queue command has its key", row.kind, id, row.user, row)
			continue
		}
		k := userKey{row.user, *row.key}
		byKey[k] = append(byKey[k], id)
		if final, ok := owner[k].FinalAnswer(); ok && final.Status/100 != 2 {
			v.fail(&v.QueueDisagree, "queue key %s of user %s was answered %d, but %s %s moved money", k.key, k.user, final.Status, row.kind, id)
		}
	}
	for _, c := range cmds {
		if ids := byKey[userKey{c.User.ID, c.Key}]; c.Kind != OpReuse && len(ids) > 1 {
			v.fail(&v.QueueDouble, "queue key %s of user %s moved money %d times: %v", c.Key, c.User.ID, len(ids), ids)
		}
	}
}
