package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbState is what the database holds after a run.
type dbState struct {
	keys     map[userKey]keyRow
	rows     map[string]businessRow // by id
	entries  map[string][]entryRow  // by deposit, transaction or payout id
	balances map[userCur]int64
	sums     map[userCur]int64 // ledger entries summed
}

type userKey struct{ user, key string }
type userCur struct{ user, cur string }

type keyRow struct {
	status string
	code   *int32
	body   []byte
}

type businessRow struct {
	user, id, kind    string
	key               *string
	src, dst          string // a deposit's currency is src
	amount, converted int64
}

type entryRow struct {
	cur    string
	amount int64
}

func loadState(ctx context.Context, db *pgxpool.Pool) (*dbState, error) {
	s := &dbState{rows: map[string]businessRow{}, entries: map[string][]entryRow{},
		balances: map[userCur]int64{}, sums: map[userCur]int64{}}
	var err error
	if s.keys, err = loadKeys(ctx, db); err != nil {
		return nil, err
	}
	err = each(ctx, db, `SELECT user_id::text, id::text, idempotency_key, currency, amount FROM deposits`,
		func(r pgx.Rows) error {
			b := businessRow{kind: "deposit"}
			if err := r.Scan(&b.user, &b.id, &b.key, &b.src, &b.amount); err != nil {
				return err
			}
			s.rows[b.id] = b
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = each(ctx, db, `SELECT user_id::text, id::text, idempotency_key, source_currency, target_currency,
		amount, converted_amount FROM transactions WHERE status = 'COMPLETED'`,
		func(r pgx.Rows) error {
			b := businessRow{kind: "transaction"}
			if err := r.Scan(&b.user, &b.id, &b.key, &b.src, &b.dst, &b.amount, &b.converted); err != nil {
				return err
			}
			s.rows[b.id] = b
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = each(ctx, db, `SELECT user_id::text, currency, amount, coalesce(deposit_id, transaction_id, payout_id)::text FROM ledger_entries`,
		func(r pgx.Rows) error {
			var u, c, id string
			var a int64
			if err := r.Scan(&u, &c, &a, &id); err != nil {
				return err
			}
			s.entries[id] = append(s.entries[id], entryRow{c, a})
			s.sums[userCur{u, c}] += a
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = each(ctx, db, `SELECT user_id::text, currency, amount FROM balances`, func(r pgx.Rows) error {
		var k userCur
		var a int64
		if err := r.Scan(&k.user, &k.cur, &a); err != nil {
			return err
		}
		s.balances[k] = a
		return nil
	})
	return s, err
}

// loadKeys reads every record of the key table, by user (scope) and key.
func loadKeys(ctx context.Context, db *pgxpool.Pool) (map[userKey]keyRow, error) {
	keys := map[userKey]keyRow{}
	err := each(ctx, db, `SELECT scope, idempotency_key, status, response_code, response_body FROM idempotency_keys`,
		func(r pgx.Rows) error {
			var k userKey
			var row keyRow
			if err := r.Scan(&k.user, &k.key, &row.status, &row.code, &row.body); err != nil {
				return err
			}
			keys[k] = row
			return nil
		})
	return keys, err
}

func each(ctx context.Context, db *pgxpool.Pool, sql string, f func(pgx.Rows) error) error {
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return rows.Err()
}

// ack is a 2xx a caller got: a resource it was told exists.
type ack struct {
	op   *Op
	body []byte
	row  businessRow // as the body describes it
}

// rowIDs are the business rows' ids, sorted: findings in a stable order.
func (st *dbState) rowIDs() []string {
	ids := make([]string, 0, len(st.rows))
	for id := range st.rows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Verify checks the invariants from the database and from what the callers
// saw. api is used to read resources back as their owners and as others.
func Verify(ctx context.Context, db *pgxpool.Pool, api *Client, users []*User, ops []*Op) (*Verdict, error) {
	st, err := loadState(ctx, db)
	if err != nil {
		return nil, err
	}
	// The database also holds the queue producers' rows: keep the callers'
	// (users, and whoever owns an op, such as the payout callers).
	owners := slices.Clone(users)
	for _, op := range ops {
		owners = append(owners, op.User)
	}
	st = st.only(owners)
	v := &Verdict{Keys: len(ops)}
	acks := map[string]ack{} // by resource id
	for _, op := range ops {
		checkAnswers(v, op, acks, st)
	}
	checkEffects(v, st, acks, ops)
	checkBalances(ctx, v, st, acks, api, users)
	checkStoredOwners(v, st)
	checkReadBack(ctx, v, api, users, acks)
	return v, nil
}

// checkAnswers checks one op's answers against each other, its request, and
// the database, and collects its acknowledged resource.
func checkAnswers(v *Verdict, op *Op, acks map[string]ack, st *dbState) {
	answers := op.Answers()
	final, ok := op.FinalAnswer()
	if !ok {
		last := Attempt{Err: "never sent"}
		if len(answers) > 0 {
			last = answers[len(answers)-1]
		}
		v.fail(&v.NoFinal, "no final answer: user %s key %s (%s, %s) after %d attempts; last: status %d %s",
			op.User.ID, op.Key, op.Kind, op.Scenario, len(answers), last.Status, last.Err)
		return
	}
	executions := 0
	for _, a := range answers {
		if !a.Final() {
			continue
		}
		if a.Status != final.Status || !bytes.Equal(a.Body, final.Body) {
			v.fail(&v.WrongAnswers, "key %s of user %s (%s, %s) answered %d %q and later %d %q",
				op.Key, op.User.ID, op.Kind, op.Scenario, final.Status, final.Body, a.Status, a.Body)
		}
		if !a.Replayed && op.Kind != OpReuse {
			executions++
		}
	}
	if executions > 1 {
		v.fail(&v.WrongAnswers, "key %s of user %s (%s) was answered as executed, not replayed, %d times",
			op.Key, op.User.ID, op.Scenario, executions)
	}
	want := map[OpKind][]int{
		OpDeposit:     {http.StatusCreated, http.StatusConflict},
		OpTransaction: {http.StatusCreated, http.StatusPaymentRequired, http.StatusConflict},
		OpReuse:       {http.StatusUnprocessableEntity},
		OpInvalid:     {http.StatusBadRequest},
	}[op.Kind]
	if !slices.Contains(want, final.Status) {
		v.fail(&v.WrongAnswers, "key %s of user %s (%s, %s): final answer %d %q, want one of %v",
			op.Key, op.User.ID, op.Kind, op.Scenario, final.Status, final.Body, want)
	}
	if final.Status == http.StatusConflict {
		if op.Late {
			// A key past its retention is free whether or not the sweeper
			// has deleted its record: no business net may refuse the retry.
			v.LateRefused++
			v.fail(&v.WrongAnswers, "key %s of user %s (%s, %s): a retry after the TTL was refused by a business net: %s",
				op.Key, op.User.ID, op.Kind, op.Scenario, final.Body)
		} else {
			// The minute net fired for a key of ours: the
			// middleware let a duplicate execute. Nothing moved, but the
			// caller never learns the first request's outcome.
			v.fail(&v.WrongAnswers, "key %s of user %s (%s, %s): a business net refused it (409 without Retry-After): %s",
				op.Key, op.User.ID, op.Kind, op.Scenario, final.Body)
		}
	}
	// The stored record must be the answer the caller got. A late op's
	// record may be gone, or answer for a later life of its key.
	if !op.Late && op.Kind != OpReuse {
		rec, ok := st.keys[userKey{op.User.ID, op.Key}]
		switch {
		case !ok || rec.status != "COMPLETED" || rec.code == nil:
			counter := &v.WrongAnswers
			if final.Status/100 == 2 {
				counter = &v.LostWrites
			}
			v.fail(counter, "key %s of user %s was answered %d, but its record is %+v", op.Key, op.User.ID, final.Status, rec)
		case int(*rec.code) != final.Status || !bytes.Equal(rec.body, final.Body):
			counter := &v.WrongAnswers
			if final.Status/100 == 2 {
				counter = &v.LostWrites
			}
			v.fail(counter, "key %s of user %s was answered %d %q, but its record holds %d %q",
				op.Key, op.User.ID, final.Status, final.Body, *rec.code, rec.body)
		}
	}
	if final.Status/100 != 2 || op.Kind == OpReuse || op.Kind == OpInvalid {
		if final.Status/100 == 2 {
			v.fail(&v.WrongAnswers, "key %s of user %s (%s) got 2xx: %q", op.Key, op.User.ID, op.Kind, final.Body)
		}
		return
	}
	row, err := describe(op, final.Body)
	if err != nil {
		v.fail(&v.WrongAnswers, "key %s of user %s: 2xx body %q: %v", op.Key, op.User.ID, final.Body, err)
		return
	}
	if err := matchesRequest(op, row); err != nil {
		v.fail(&v.Foreign, "key %s of user %s: the 2xx does not answer this request: %v (body %q)", op.Key, op.User.ID, err, final.Body)
		return
	}
	if !final.Replayed || acks[row.id].op == nil {
		acks[row.id] = ack{op: op, body: final.Body, row: row}
	}
	if op.Late && !final.Replayed && op.Scenario == "late-retry" {
		v.LateReexecuted++
	}
	got, ok := st.rows[row.id]
	switch {
	case !ok:
		v.fail(&v.LostWrites, "user %s was given %s %s (key %s) with 2xx, but the database has no such row", op.User.ID, row.kind, row.id, op.Key)
	case got.user != op.User.ID:
		v.fail(&v.Foreign, "user %s was given %s %s (key %s), which belongs to user %s", op.User.ID, row.kind, row.id, op.Key, got.user)
	case got.kind != row.kind || got.src != row.src || got.dst != row.dst || got.amount != row.amount || got.converted != row.converted:
		v.fail(&v.LostWrites, "user %s was given %+v (key %s), the database holds %+v", op.User.ID, row, op.Key, got)
	case got.key != nil && *got.key != op.Key:
		v.fail(&v.WrongAnswers, "user %s was given %s %s for key %s, but the row was made for key %s", op.User.ID, row.kind, row.id, op.Key, *got.key)
	}
}

// checkEffects finds money that moved without its caller being told so,
// and ops with more than one effect. A row is the op's whose key it
// carries; a row whose key is gone (released, or never set) is the op's
// whose request it matches, amounts being unique per user.
func checkEffects(v *Verdict, st *dbState, acks map[string]ack, ops []*Op) {
	byKey := map[userKey][]*Op{}
	bySig := map[businessRow][]*Op{}
	for _, op := range ops {
		if op.Kind != OpDeposit && op.Kind != OpTransaction {
			continue
		}
		byKey[userKey{op.User.ID, op.Key}] = append(byKey[userKey{op.User.ID, op.Key}], op)
		if sig, err := signature(op); err == nil {
			bySig[sig] = append(bySig[sig], op)
		}
	}
	effects := map[*Op][]string{}
	for _, id := range st.rowIDs() {
		row := st.rows[id]
		if !entriesMatch(row, st.entries[id]) {
			v.fail(&v.DoubleEffects, "%s %s of user %s moved balances %+v; it should move exactly its own amounts", row.kind, id, row.user, st.entries[id])
		}
		if a, ok := acks[id]; ok {
			v.Executed++
			effects[a.op] = append(effects[a.op], id)
			continue
		}
		var owners []*Op
		if row.key != nil {
			owners = byKey[userKey{row.user, *row.key}]
		} else {
			owners = bySig[businessRow{user: row.user, kind: row.kind, src: row.src, dst: row.dst, amount: row.amount}]
		}
		told := false
		for _, op := range owners {
			final, ok := op.FinalAnswer()
			switch {
			case !ok:
				told = true // counted as a key without a final answer
			case final.Status/100 == 2:
				told = true
				effects[op] = append(effects[op], id)
			}
		}
		if !told {
			key := "none"
			if row.key != nil {
				key = *row.key
			}
			v.fail(&v.UnackedEffects, "%s %s of user %s (key %s, %+v) moved money, but no caller was told it did", row.kind, id, row.user, key, row)
		}
	}
	for _, op := range ops {
		ids := effects[op]
		// A late op's key may rightly run once per life, but each life is
		// an op of its own.
		if len(ids) > 1 {
			v.fail(&v.DoubleEffects, "key %s of user %s (%s, %s) moved money %d times: %v", op.Key, op.User.ID, op.Kind, op.Scenario, len(ids), ids)
		}
	}
}

// signature is the business row op's request would make, less its id.
func signature(op *Op) (businessRow, error) {
	var req struct {
		Currency string `json:"currency"`
		Source   string `json:"source_currency"`
		Target   string `json:"target_currency"`
		Amount   int64  `json:"amount"`
	}
	if err := json.Unmarshal(op.Body, &req); err != nil {
		return businessRow{}, err
	}
	if op.Kind == OpDeposit {
		return businessRow{user: op.User.ID, kind: "deposit", src: req.Currency, amount: req.Amount}, nil
	}
	return businessRow{user: op.User.ID, kind: "transaction", src: req.Source, dst: req.Target, amount: req.Amount}, nil
}

func entriesMatch(row businessRow, es []entryRow) bool {
	want := []entryRow{{row.src, row.amount}}
	if row.kind == "transaction" {
		want = []entryRow{{row.src, -row.amount}, {row.dst, row.converted}}
	}
	if len(es) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.Contains(es, w) {
			return false
		}
	}
	return true
}

// checkBalances compares every balance with what the acknowledged
// movements make it: from the database rows, the ledger, and the API.
func checkBalances(ctx context.Context, v *Verdict, st *dbState, acks map[string]ack, api *Client, users []*User) {
	want := map[userCur]int64{}
	for _, a := range acks {
		u := a.op.User.ID
		if a.row.kind == "deposit" {
			want[userCur{u, a.row.src}] += a.row.amount
		} else {
			want[userCur{u, a.row.src}] -= a.row.amount
			want[userCur{u, a.row.dst}] += a.row.converted
		}
	}
	for _, u := range users {
		fromAPI, err := apiBalances(ctx, api, u)
		if err != nil {
			v.fail(&v.BalanceErrors, "%v", err)
		}
		curs := currencies(u, want, st.balances)
		for c := range fromAPI {
			curs[c] = true
		}
		for c := range curs {
			k := userCur{u.ID, c}
			if st.balances[k] != want[k] || st.sums[k] != want[k] || fromAPI[c] != want[k] {
				v.fail(&v.BalanceErrors, "user %s %s: acknowledged movements make %d; balance row %d, ledger %d, API %d",
					u.ID, c, want[k], st.balances[k], st.sums[k], fromAPI[c])
			}
		}
	}
}

// currencies are u's currencies in any of ms.
func currencies(u *User, ms ...map[userCur]int64) map[string]bool {
	curs := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			if k.user == u.ID {
				curs[k.cur] = true
			}
		}
	}
	return curs
}

// apiBalances is GET /v1/balances as u, by currency.
func apiBalances(ctx context.Context, api *Client, u *User) (map[string]int64, error) {
	a := api.Get(ctx, u, "/v1/balances")
	var body struct {
		Balances []struct {
			Currency string `json:"currency"`
			Amount   int64  `json:"amount"`
		} `json:"balances"`
	}
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &body) != nil {
		return nil, fmt.Errorf("GET /v1/balances as user %s: %d %q %s", u.ID, a.Status, a.Body, a.Err)
	}
	got := map[string]int64{}
	for _, b := range body.Balances {
		got[b.Currency] = b.Amount
	}
	return got, nil
}

// checkStoredOwners checks every stored response that names a resource:
// the resource is its own user's.
func checkStoredOwners(v *Verdict, st *dbState) {
	for k, rec := range st.keys {
		var body struct {
			ID string `json:"id"`
		}
		if rec.code == nil || *rec.code/100 != 2 || json.Unmarshal(rec.body, &body) != nil || body.ID == "" {
			continue
		}
		if row, ok := st.rows[body.ID]; ok && row.user != k.user {
			v.fail(&v.Foreign, "the record of key %s of user %s stores a response naming %s %s of user %s", k.key, k.user, row.kind, row.id, row.user)
		}
	}
}

// checkReadBack reads acknowledged deposits and transactions back as their
// owners, who must see what they were given, and some as another user, who
// must not see them at all.
func checkReadBack(ctx context.Context, v *Verdict, api *Client, users []*User, acks map[string]ack) {
	if len(users) < 2 {
		return
	}
	ids := make([]string, 0, len(acks))
	for id := range acks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	const maxReads = 600
	if len(ids) > maxReads {
		ids = ids[:maxReads]
	}
	for i, id := range ids {
		a := acks[id]
		path := "/v1/" + a.row.kind + "s/" + id
		own := api.Get(ctx, a.op.User, path)
		row, err := describe(a.op, own.Body)
		switch {
		case own.Status != http.StatusOK:
			v.fail(&v.LostWrites, "GET %s as its owner %s: %d %q %s", path, a.op.User.ID, own.Status, own.Body, own.Err)
		case err != nil || row != a.row:
			v.fail(&v.WrongAnswers, "GET %s as its owner: %q, the caller was given %q", path, own.Body, a.body)
		}
		if i%4 != 0 {
			continue
		}
		other := users[0]
		if other.ID == a.op.User.ID {
			other = users[1]
		}
		if got := api.Get(ctx, other, path); got.Status != http.StatusNotFound {
			v.fail(&v.Foreign, "GET %s as user %s, not its owner: %d %q", path, other.ID, got.Status, got.Body)
		}
	}
}

// describe reads a 2xx body as the business row it announces.
func describe(op *Op, body []byte) (businessRow, error) {
	row := businessRow{user: op.User.ID}
	if op.Path == "/v1/deposits" {
		var d depositBody
		if err := json.Unmarshal(body, &d); err != nil {
			return row, err
		}
		row.kind, row.id, row.src, row.amount = "deposit", d.ID, d.Currency, d.Amount
	} else {
		var t transactionBody
		if err := json.Unmarshal(body, &t); err != nil {
			return row, err
		}
		row.kind, row.id, row.src, row.dst, row.amount, row.converted = "transaction", t.ID, t.SourceCurrency, t.TargetCurrency, t.Amount, t.ConvertedAmount
	}
	if row.id == "" {
		return row, fmt.Errorf("no id")
	}
	return row, nil
}

// matchesRequest checks that a 2xx answers op's own request: same
// currencies, same amount (which ends in the caller's worker id).
func matchesRequest(op *Op, row businessRow) error {
	var req struct {
		Currency string `json:"currency"`
		Source   string `json:"source_currency"`
		Target   string `json:"target_currency"`
		Amount   int64  `json:"amount"`
	}
	if err := json.Unmarshal(op.Body, &req); err != nil {
		return err
	}
	src := req.Currency
	if row.kind == "transaction" {
		src = req.Source
	}
	if row.src != src || row.dst != req.Target || row.amount != req.Amount {
		return fmt.Errorf("asked for %s, got %s %s→%s %d", op.Body, row.kind, row.src, row.dst, row.amount)
	}
	return nil
}
