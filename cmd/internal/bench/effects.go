package bench

import (
	"bytes"
	"context"
	"fmt"

	"github.com/idem-dev/idem/cmd/internal/bank"
)

// effectCheck is what the keys of one segment did to the ledger (and, for
// payouts, at the bank): the storms', and every key a checked variant sent.
type effectCheck struct {
	Keys          int // keys sent, warm-up included
	Executed      int // answers that ran the handler (success, not replayed)
	DoubleEffects int // effects beyond the first for one key
	LostEffects   int // keys with no effect although one answer said success
	NetFired      int // answers from a business net: a duplicate reached the handler
	BodyMismatch  int // replayed answers whose body differs from the executed one
}

func (s *effectCheck) add(o *effectCheck) {
	s.Keys += o.Keys
	s.Executed += o.Executed
	s.DoubleEffects += o.DoubleEffects
	s.LostEffects += o.LostEffects
	s.NetFired += o.NetFired
	s.BodyMismatch += o.BodyMismatch
}

// sentKey is one key and everything answered for it.
type sentKey struct {
	rq       request
	outcomes []outcome
}

// effectTables are where each op's effect is a row, found by user and
// amount (each key has an amount of its own), so the count does not rest
// on the key the row keeps.
var effectTables = map[op]string{opTransaction: "transactions", opDeposit: "deposits", opPayout: "payouts", opTrivial: "bench_trivial"}

// verifyEffects counts the effects of the keys sent: each key's rows in
// its op's table and, for payouts, its transfers at the bank (v.peer).
// A key sent several times (a replay) is counted once, with all its
// answers.
func verifyEffects(ctx context.Context, v *variant, sent []sentKey) (*effectCheck, error) {
	var keys []*sentKey
	byKey := map[string]*sentKey{}
	for _, s := range sent {
		id := s.rq.user.id + "\x00" + s.rq.key
		if k := byKey[id]; k != nil {
			k.outcomes = append(k.outcomes, s.outcomes...)
			continue
		}
		k := &sentKey{rq: s.rq, outcomes: s.outcomes}
		byKey[id] = k
		keys = append(keys, k)
	}
	chk := &effectCheck{Keys: len(keys)}
	users := make([]string, len(keys))
	amounts := make([]int64, len(keys))
	for i, k := range keys {
		users[i], amounts[i] = k.rq.user.id, k.rq.amount
	}
	rows, err := v.db.pool.Query(ctx, `
SELECT k.i, count(t.id)
  FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k (user_id, amount, i)
  LEFT JOIN `+effectTables[v.op]+` t ON t.user_id = k.user_id AND t.amount = k.amount
 GROUP BY k.i`, users, amounts)
	if err != nil {
		return nil, fmt.Errorf("verify effects: %w", err)
	}
	effects := make([]int, len(keys))
	for rows.Next() {
		var i int64
		var n int
		if err := rows.Scan(&i, &n); err != nil {
			return nil, err
		}
		effects[i-1] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("verify effects: %w", err)
	}
	var transfers map[int64]int
	if v.op == opPayout {
		if transfers, err = bankTransfers(ctx, v.peer); err != nil {
			return nil, err
		}
	}
	for i, k := range keys {
		var first []byte
		ok := false
		for _, o := range k.outcomes {
			if isNet(o) {
				chk.NetFired++
			}
			if !v.succeeded(o) {
				continue
			}
			ok = true
			if !o.replayed {
				chk.Executed++
			}
			switch {
			case first == nil:
				first = o.body
			case !bytes.Equal(first, o.body):
				chk.BodyMismatch++
			}
		}
		counts := []int{effects[i]}
		if transfers != nil {
			counts = append(counts, transfers[k.rq.amount])
		}
		for _, n := range counts {
			if n > 1 {
				chk.DoubleEffects += n - 1
			}
			if n == 0 && ok {
				chk.LostEffects++
			}
		}
	}
	return chk, nil
}

// bankTransfers counts the settled transfers bankd recorded, by amount.
func bankTransfers(ctx context.Context, peer *server) (map[int64]int, error) {
	list, err := bank.List(ctx, peer.base)
	if err != nil {
		return nil, err
	}
	out := map[int64]int{}
	for _, t := range list {
		if t.Status == bank.StatusSettled {
			out[t.Amount]++
		}
	}
	return out, nil
}
