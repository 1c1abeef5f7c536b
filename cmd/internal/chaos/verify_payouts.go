package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idem-dev/idem/cmd/internal/bank"
	paymentsapi "github.com/idem-dev/idem/payments/api"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PayoutVerdict is what the payout checks found. The fields marked
// must-be-0 fail the run.
type PayoutVerdict struct {
	Ops int // payouts the callers sent
	// The callers' first final answers: 201 paid, 201 failed (refunded),
	// 202 pending, 402.
	Paid, Failed, Pending, Refused int
	Settled, Rejected              int // transfers the bank recorded
	PaidTwice                      int // must be 0: more than one settled transfer, or payout, for one payout request
	Unpaid                         int // must be 0: a payout debited, not paid by the bank, and never refunded
	Orphans                        int // must be 0: a bank transfer no payout debited for
	NotFinal                       int // must be 0: a payout neither paid nor failed after the quiet period
	Mismatches                     int // must be 0: a payout whose debit, refund, status or transfer differ from what the bank did
	Answers                        int // must be 0: a caller's answers that differ from each other or from the payout's final state
}

func (p *PayoutVerdict) invariants() []int {
	return []int{p.PaidTwice, p.Unpaid, p.Orphans, p.NotFinal, p.Mismatches, p.Answers}
}

// payoutRow is a row of the payouts table.
type payoutRow struct {
	user, id, cur, dest, status, bankKey string
	amount                               int64
	key, transferID                      *string
}

// payoutState is what the database and the bank hold after a run.
type payoutState struct {
	*dbState                       // balances, ledger sums, and ledger entries by payout id
	payouts   map[string]payoutRow // by id
	transfers []bank.Transfer
	// After the quiet period: the payouts still pending, and the records
	// still unfinished.
	stuck      map[string]bool
	unfinished []userKey
}

func loadPayoutState(ctx context.Context, db *pgxpool.Pool, transfers []bank.Transfer, stuck map[string]bool, unfinished []userKey) (*payoutState, error) {
	base, err := loadState(ctx, db)
	if err != nil {
		return nil, err
	}
	st := &payoutState{dbState: base, payouts: map[string]payoutRow{}, transfers: transfers, stuck: stuck, unfinished: unfinished}
	err = each(ctx, db, `SELECT user_id::text, id::text, currency, amount, destination, status, bank_key,
		idempotency_key, bank_transfer_id FROM payouts`, func(r pgx.Rows) error {
		var p payoutRow
		if err := r.Scan(&p.user, &p.id, &p.cur, &p.amount, &p.dest, &p.status, &p.bankKey, &p.key, &p.transferID); err != nil {
			return err
		}
		st.payouts[p.id] = p
		return nil
	})
	return st, err
}

// checkPayouts checks every payout against the bank, and every payout
// request's answers against each other and the payout's final state.
func checkPayouts(v *Verdict, st *payoutState, ops []*Op) {
	pv := &v.Payouts
	pv.Ops = len(ops)
	ids := make([]string, 0, len(st.payouts))
	for id := range st.payouts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	byKey := map[userKey][]payoutRow{}
	byBankKey := map[string]payoutRow{}
	for _, id := range ids {
		p := st.payouts[id]
		if p.key != nil {
			byKey[userKey{p.user, *p.key}] = append(byKey[userKey{p.user, *p.key}], p)
		}
		byBankKey[p.bankKey] = p
	}
	transfers := map[string]bank.Transfer{} // by idempotency key
	settled := map[string][]bank.Transfer{} // by destination: one payout request each
	for _, t := range st.transfers {
		switch t.Status {
		case "settled":
			pv.Settled++
			settled[t.Destination] = append(settled[t.Destination], t)
		case "rejected":
			pv.Rejected++
		}
		if _, ok := byBankKey[t.IdempotencyKey]; !ok {
			v.fail(&pv.Orphans, "the bank recorded transfer %s (%s %d %s to %s) under key %s, which no payout was debited for",
				t.ID, t.Status, t.Amount, t.Currency, t.Destination, t.IdempotencyKey)
		}
		if prior, ok := transfers[t.IdempotencyKey]; ok {
			v.fail(&pv.PaidTwice, "the bank recorded transfers %s and %s under one key %s", prior.ID, t.ID, t.IdempotencyKey)
		}
		transfers[t.IdempotencyKey] = t
	}
	dests := make([]string, 0, len(settled))
	for d := range settled {
		dests = append(dests, d)
	}
	sort.Strings(dests)
	for _, d := range dests {
		if ts := settled[d]; len(ts) > 1 {
			v.fail(&pv.PaidTwice, "payout request to %s was paid %d times at the bank: %+v", d, len(ts), ts)
		}
	}
	for _, id := range ids {
		p := st.payouts[id]
		t, ok := transfers[p.bankKey]
		checkPayoutRow(v, p, st.entries[id], t, ok, st.stuck[id])
	}
	for _, k := range st.unfinished {
		if !slices.ContainsFunc(byKey[k], func(p payoutRow) bool { return st.stuck[p.id] || p.status == "pending" }) {
			v.fail(&pv.NotFinal, "after the quiet period the record of key %s of user %s was unfinished, its payout final", k.key, k.user)
		}
	}
	asked := map[userKey]bool{}
	for _, op := range ops {
		k := userKey{op.User.ID, op.Key}
		asked[k] = true
		var req payoutRequest
		_ = json.Unmarshal(op.Body, &req)
		checkPayoutAnswers(v, op, req, byKey[k], settled[req.Destination])
	}
	for _, id := range ids {
		p := st.payouts[id]
		if p.key == nil || !asked[userKey{p.user, *p.key}] {
			v.fail(&pv.Mismatches, "payout %s of user %s (%+v) was debited, but no payout request of that user and key was sent", p.id, p.user, p)
		}
	}
}

// checkPayoutRow checks one payout's status, transfer id and ledger
// entries against the bank's transfer t (ok: the bank recorded one under
// its key). stuck: it was pending at the end of the quiet period.
func checkPayoutRow(v *Verdict, p payoutRow, es []entryRow, t bank.Transfer, ok, stuck bool) {
	pv := &v.Payouts
	if p.status == "pending" || stuck {
		v.fail(&pv.NotFinal, "payout %s of user %s (key %s, %d %s to %s) was pending after the quiet period; the bank holds %+v",
			p.id, p.user, deref(p.key), p.amount, p.cur, p.dest, t)
		return
	}
	debit := []entryRow{{p.cur, -p.amount}}
	refunded := []entryRow{{p.cur, -p.amount}, {p.cur, p.amount}}
	var sum int64
	for _, e := range es {
		sum += e.amount
	}
	if !slices.Contains(es, debit[0]) {
		v.fail(&pv.Mismatches, "payout %s of user %s (%d %s) has ledger entries %+v: no debit of its amount", p.id, p.user, p.amount, p.cur, es)
		return
	}
	switch {
	case !ok && sum != 0:
		v.fail(&pv.Unpaid, "payout %s of user %s (%d %s to %s) is %s and debited, but the bank has no transfer under its key",
			p.id, p.user, p.amount, p.cur, p.dest, p.status)
	case !ok:
		v.fail(&pv.Mismatches, "payout %s of user %s was refunded, but the bank never rejected it (it has no transfer under its key)", p.id, p.user)
	case t.Amount != p.amount || t.Currency != p.cur || t.Destination != p.dest:
		v.fail(&pv.Mismatches, "payout %s of user %s debited %d %s for %s; the bank moved %d %s to %s (%s)",
			p.id, p.user, p.amount, p.cur, p.dest, t.Amount, t.Currency, t.Destination, t.ID)
	case p.transferID == nil || *p.transferID != t.ID:
		v.fail(&pv.Mismatches, "payout %s of user %s names bank transfer %s; the bank recorded %s under its key", p.id, p.user, deref(p.transferID), t.ID)
	case t.Status == "settled" && (p.status != "paid" || !sameEntries(es, debit)):
		v.fail(&pv.Mismatches, "payout %s of user %s was paid by the bank (%s), but it is %s with ledger entries %+v", p.id, p.user, t.ID, p.status, es)
	case t.Status == "rejected" && sum != 0:
		v.fail(&pv.Unpaid, "payout %s of user %s was rejected by the bank (%s) and never refunded: it is %s with ledger entries %+v", p.id, p.user, t.ID, p.status, es)
	case t.Status == "rejected" && (p.status != "failed" || !sameEntries(es, refunded)):
		v.fail(&pv.Mismatches, "payout %s of user %s was rejected by the bank (%s), but it is %s with ledger entries %+v", p.id, p.user, t.ID, p.status, es)
	case t.Status != "settled" && t.Status != "rejected":
		v.fail(&pv.Mismatches, "the bank's transfer %s of payout %s has status %q", t.ID, p.id, t.Status)
	}
	if reject := strings.HasPrefix(p.dest, "reject-"); reject != (p.status == "failed") {
		v.fail(&pv.Mismatches, "payout %s of user %s to %s ended %s", p.id, p.user, p.dest, p.status)
	}
}

// checkPayoutAnswers checks one payout request's answers against each
// other, its request, and the payout its key made (rows; more than one is
// a double payment) and the transfers settled to its destination.
func checkPayoutAnswers(v *Verdict, op *Op, req payoutRequest, rows []payoutRow, settled []bank.Transfer) {
	pv := &v.Payouts
	if len(rows) > 1 {
		v.fail(&pv.PaidTwice, "payout key %s of user %s made %d payouts: %+v", op.Key, op.User.ID, len(rows), rows)
	}
	var (
		first        *Attempt
		stored       *Attempt // the first 201 or 402: stored, and replayed byte for byte
		id           string
		executions   int
		storedStatus string
	)
	for _, a := range op.Answers() {
		if !a.Final() {
			continue
		}
		if first == nil {
			first = &a
			pv.countFirst(a)
		}
		var b paymentsapi.PayoutView
		switch {
		case a.Status == http.StatusCreated || a.Status == http.StatusAccepted:
			if err := json.Unmarshal(a.Body, &b); err != nil || b.ID == "" || b.Currency != req.Currency || b.Amount != req.Amount || b.Destination != req.Destination {
				v.fail(&pv.Answers, "payout key %s of user %s: %d %q does not answer %s", op.Key, op.User.ID, a.Status, a.Body, op.Body)
				continue
			}
			if id != "" && b.ID != id {
				v.fail(&pv.Answers, "payout key %s of user %s was answered with payouts %s and %s", op.Key, op.User.ID, id, b.ID)
			}
			id = b.ID
			if pending := a.Status == http.StatusAccepted; pending != (b.Status == "pending") || (pending && a.Replayed) {
				v.fail(&pv.Answers, "payout key %s of user %s: %d (replayed %t) for a %s payout", op.Key, op.User.ID, a.Status, a.Replayed, b.Status)
			}
			if a.Status == http.StatusAccepted {
				continue // not stored: a retry resumes the payout
			}
		case a.Status != http.StatusPaymentRequired:
			v.fail(&pv.Answers, "payout key %s of user %s: final answer %d %q, want 201, 202 or 402", op.Key, op.User.ID, a.Status, a.Body)
			continue
		}
		switch {
		case stored == nil:
			stored, storedStatus = &a, b.Status
		case a.Status != stored.Status || !bytes.Equal(a.Body, stored.Body):
			v.fail(&pv.Answers, "payout key %s of user %s answered %d %q and later %d %q", op.Key, op.User.ID, stored.Status, stored.Body, a.Status, a.Body)
		}
		if !a.Replayed {
			executions++
		}
	}
	switch {
	case first == nil:
		v.fail(&v.NoFinal, "no final answer: payout key %s of user %s (%s) after %d attempts", op.Key, op.User.ID, op.Scenario, len(op.Answers()))
		return
	case executions > 1:
		v.fail(&pv.Answers, "payout key %s of user %s (%s) was answered as executed, not replayed, %d times", op.Key, op.User.ID, op.Scenario, executions)
	}
	if id == "" {
		// Refused: nothing may have been debited or paid.
		if len(rows) > 0 || len(settled) > 0 {
			v.fail(&pv.Answers, "payout key %s of user %s was refused %d, but it made payouts %+v and transfers %+v", op.Key, op.User.ID, first.Status, rows, settled)
		}
		return
	}
	i := slices.IndexFunc(rows, func(p payoutRow) bool { return p.id == id })
	if i < 0 {
		v.fail(&pv.Answers, "payout key %s of user %s was answered with payout %s, which the database does not hold under the key", op.Key, op.User.ID, id)
		return
	}
	if stored == nil || rows[i].status == "pending" {
		return // only pending answers: the checks of the payout tell the rest
	}
	var b paymentsapi.PayoutView
	_ = json.Unmarshal(stored.Body, &b)
	if storedStatus != rows[i].status || deref(b.BankTransferID) != deref(rows[i].transferID) {
		v.fail(&pv.Answers, "payout key %s of user %s was answered %s (transfer %s); the payout is %s (transfer %s)",
			op.Key, op.User.ID, storedStatus, deref(b.BankTransferID), rows[i].status, deref(rows[i].transferID))
	}
}

func (p *PayoutVerdict) countFirst(a Attempt) {
	switch {
	case a.Status == http.StatusAccepted:
		p.Pending++
	case a.Status == http.StatusPaymentRequired:
		p.Refused++
	case bytes.Contains(a.Body, []byte(`"status":"failed"`)):
		p.Failed++
	case a.Status == http.StatusCreated:
		p.Paid++
	}
}

// checkPayoutBalances compares each payout caller's balances with what
// its acknowledged deposits and the bank make them: the deposits, less
// every payout the bank paid (and every one still pending, debited).
func checkPayoutBalances(v *Verdict, st *payoutState, deposits []*Op, users []*User) {
	want := map[userCur]int64{}
	for _, op := range deposits {
		var d depositBody
		if a, ok := op.FinalAnswer(); ok && a.Status == http.StatusCreated && json.Unmarshal(a.Body, &d) == nil {
			want[userCur{op.User.ID, d.Currency}] += d.Amount
		}
	}
	paid := map[string]bool{}
	for _, t := range st.transfers {
		if t.Status == "settled" {
			paid[t.IdempotencyKey] = true
		}
	}
	for _, p := range st.payouts {
		if paid[p.bankKey] || p.status == "pending" {
			want[userCur{p.user, p.cur}] -= p.amount
		}
	}
	for _, u := range users {
		for c := range currencies(u, want, st.balances) {
			k := userCur{u.ID, c}
			if st.balances[k] != want[k] || st.sums[k] != want[k] {
				v.fail(&v.BalanceErrors, "payout caller %s %s: acknowledged deposits less the bank's payments make %d; balance row %d, ledger %d",
					u.ID, c, want[k], st.balances[k], st.sums[k])
			}
		}
	}
}

// checkPayoutReads reads every payout caller's balances and payouts back
// through the API: as their owner, what the database holds; as another
// caller, nothing.
func checkPayoutReads(ctx context.Context, v *Verdict, st *payoutState, api *Client, users []*User) {
	byID := map[string]*User{}
	for _, u := range users {
		byID[u.ID] = u
		got, err := apiBalances(ctx, api, u)
		if err != nil {
			v.fail(&v.BalanceErrors, "%v", err)
		}
		for k, want := range st.balances {
			if k.user == u.ID && got[k.cur] != want {
				v.fail(&v.BalanceErrors, "payout caller %s %s: GET /v1/balances says %d, the balance row %d", u.ID, k.cur, got[k.cur], want)
			}
		}
	}
	ids := make([]string, 0, len(st.payouts))
	for id := range st.payouts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	const maxReads = 300
	for i, id := range ids[:min(len(ids), maxReads)] {
		p, path := st.payouts[id], "/v1/payouts/"+id
		owner := byID[p.user]
		if owner == nil {
			continue
		}
		own := api.Get(ctx, owner, path)
		var b paymentsapi.PayoutView
		if own.Status != http.StatusOK || json.Unmarshal(own.Body, &b) != nil || b.Status != p.status || b.Amount != p.amount ||
			deref(b.BankTransferID) != deref(p.transferID) {
			v.fail(&v.Payouts.Answers, "GET %s as its owner %s: %d %q %s; the database holds %+v", path, p.user, own.Status, own.Body, own.Err, p)
		}
		if i%4 != 0 || len(users) < 2 {
			continue
		}
		other := users[0]
		if other == owner {
			other = users[1]
		}
		if got := api.Get(ctx, other, path); got.Status != http.StatusNotFound {
			v.fail(&v.Foreign, "GET %s as user %s, not its owner: %d %q", path, other.ID, got.Status, got.Body)
		}
	}
}

// sameEntries reports whether es are want, in any order.
func sameEntries(es, want []entryRow) bool {
	less := func(a, b entryRow) int { return cmp.Compare(a.amount, b.amount) }
	return slices.Equal(slices.SortedFunc(slices.Values(es), less), slices.SortedFunc(slices.Values(want), less))
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// payoutRows adds the payouts' rows to the table.
func payoutRows(row func(string, func(*Result) string)) {
	stat := func(f func(*PayoutStats) int64) func(*Result) string {
		return func(r *Result) string { return fmt.Sprint(f(&r.Stats.Payouts)) }
	}
	verdict := func(f func(*PayoutVerdict) string) func(*Result) string {
		return func(r *Result) string {
			if r.Verdict == nil {
				return "-"
			}
			return f(&r.Verdict.Payouts)
		}
	}
	count := func(f func(*PayoutVerdict) int) func(*Result) string {
		return verdict(func(p *PayoutVerdict) string { return fmt.Sprint(f(p)) })
	}
	row("payouts sent", count(func(p *PayoutVerdict) int { return p.Ops }))
	row("  first answer: paid / failed / 202 pending / 402", verdict(func(p *PayoutVerdict) string {
		return fmt.Sprintf("%d / %d / %d / %d", p.Paid, p.Failed, p.Pending, p.Refused)
	}))
	row("  bank transfers: settled / rejected", verdict(func(p *PayoutVerdict) string { return fmt.Sprintf("%d / %d", p.Settled, p.Rejected) }))
	row("bank restarts / bank faults injected", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Stats.Payouts.BankRestarts.Load(), r.Stats.Payouts.BankFaults.Load())
	})
	row("payouts finished by a completer", stat(func(s *PayoutStats) int64 { return s.Completed.Load() }))
	row("payouts pending when the faults stopped", stat(func(s *PayoutStats) int64 { return s.PendingAtCalm.Load() }))
	row("  all final after", func(r *Result) string {
		return (time.Duration(r.Stats.Payouts.QuietMillis.Load()) * time.Millisecond).Round(100 * time.Millisecond).String()
	})
	row("payouts paid twice (must be 0)", count(func(p *PayoutVerdict) int { return p.PaidTwice }))
	row("payouts debited, unpaid, unrefunded (must be 0)", count(func(p *PayoutVerdict) int { return p.Unpaid }))
	row("bank transfers without a debit (must be 0)", count(func(p *PayoutVerdict) int { return p.Orphans }))
	row("payouts not final after quiet (must be 0)", count(func(p *PayoutVerdict) int { return p.NotFinal }))
	row("payouts differing from the bank (must be 0)", count(func(p *PayoutVerdict) int { return p.Mismatches }))
	row("payout answers that disagree (must be 0)", count(func(p *PayoutVerdict) int { return p.Answers }))
}
