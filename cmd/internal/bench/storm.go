package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/idem-dev/idem/payments/api"
)

// stormCheck is what the storms of one segment did to the ledger.
type stormCheck struct {
	Keys          int // keys stormed, warm-up included
	Executed      int // answers that ran the handler (201, not replayed)
	DoubleEffects int // transactions beyond the first for one key
	LostEffects   int // keys with no transaction although one answer said 201
	NetFired      int // answers from a business net: a duplicate reached the handler
	BodyMismatch  int // replayed answers whose body differs from the executed one
}

// stormKey is everything answered for one key.
type stormKey struct {
	rq       request
	amount   int64
	outcomes []outcome
}

// runStorm sends each key from StormClients clients at once, in
// Concurrency/StormClients groups, and waits for all answers before the
// next key.
func runStorm(ctx context.Context, v *variant, wl *workload, conc, clients int, w window) (*tally, *stormCheck, error) {
	c := newHTTPClient(conc)
	defer c.CloseIdleConnections()
	groups := conc / clients
	var (
		mu   sync.Mutex
		keys []*stormKey
	)
	t, err := closedLoop(ctx, groups, w, func(r *rand.Rand, t *tally) error {
		rq, amount := wl.next(r, v.db)
		k := &stormKey{rq: rq, amount: amount, outcomes: make([]outcome, clients)}
		times := make([][2]time.Time, clients)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range clients {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				k.outcomes[i] = send(ctx, c, v.srv.base, rq, true)
				times[i] = [2]time.Time{t0, time.Now()}
			})
		}
		close(start)
		wg.Wait()
		for i, o := range k.outcomes {
			t.add(w, times[i][0], times[i][1], o, stormOK(o))
		}
		mu.Lock()
		keys = append(keys, k)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	check, err := verifyStorm(ctx, v.db, keys)
	return t, check, err
}

// stormOK: what a duplicate may legitimately get. 201 (it ran, or it is a
// replay) or 409 for a request still in flight (leased mode); never a net's
// 409 or a 5xx.
func stormOK(o outcome) bool {
	if o.err != nil {
		return false
	}
	switch o.status {
	case http.StatusCreated:
		return true
	case http.StatusConflict:
		return !isNet(o)
	}
	return false
}

func isNet(o outcome) bool {
	var p api.Problem
	return o.status == http.StatusConflict && json.Unmarshal(o.body, &p) == nil && p.Type == api.TypeURI(api.ProblemDuplicate)
}

// verifyStorm counts the transactions each stormed key made, by user and
// amount (each key has an amount of its own), so the count does not rest on
// the key the transactions table keeps.
func verifyStorm(ctx context.Context, db *database, keys []*stormKey) (*stormCheck, error) {
	chk := &stormCheck{Keys: len(keys)}
	users := make([]string, len(keys))
	amounts := make([]int64, len(keys))
	for i, k := range keys {
		users[i], amounts[i] = k.rq.user.id, k.amount
	}
	rows, err := db.pool.Query(ctx, `
SELECT k.i, count(t.id)
  FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS k (user_id, amount, i)
  LEFT JOIN transactions t ON t.user_id = k.user_id AND t.amount = k.amount
 GROUP BY k.i`, users, amounts)
	if err != nil {
		return nil, fmt.Errorf("verify storm: %w", err)
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
		return nil, fmt.Errorf("verify storm: %w", err)
	}
	for i, k := range keys {
		var first []byte
		ok201 := false
		for _, o := range k.outcomes {
			if isNet(o) {
				chk.NetFired++
			}
			if o.err != nil || o.status != http.StatusCreated {
				continue
			}
			ok201 = true
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
		if effects[i] > 1 {
			chk.DoubleEffects += effects[i] - 1
		}
		if effects[i] == 0 && ok201 {
			chk.LostEffects++
		}
	}
	return chk, nil
}
