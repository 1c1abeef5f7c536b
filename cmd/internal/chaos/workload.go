package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Worker is one caller: one user, one request at a time, each retried to a
// final answer before the next, the way a checkout waits for its payment.
type Worker struct {
	ID     int
	User   *User
	client *Client
	rng    *rand.Rand
	prof   Profile
	stats  *Stats

	Ops   []*Op            // every op, in order; written by the worker goroutine only
	known map[string]int64 // balances as the worker's acknowledged answers make them
}

// NewWorker returns worker id, calling base as user.
func NewWorker(id int, user *User, base string, prof Profile, stats *Stats, seed uint64) *Worker {
	return &Worker{
		ID: id, User: user, prof: prof, stats: stats,
		client: NewClient(base, prof.SDK, stats),
		rng:    rand.New(rand.NewPCG(seed, uint64(id))),
		known:  map[string]int64{},
	}
}

// Close releases the worker's connections.
func (w *Worker) Close() { w.client.Close() }

// depositCurrencies and their weights; JPY has no minor unit.
var depositCurrencies = []string{"USD", "USD", "EUR", "EUR", "GBP", "JPY"}

// Run makes ops until stop, then lets the last one finish its retries until
// deadline.
func (w *Worker) Run(ctx context.Context, stop, deadline time.Time) {
	for seq := 0; seq < w.prof.MaxOps && time.Now().Before(stop) && ctx.Err() == nil; seq++ {
		op := w.next(seq)
		w.Ops = append(w.Ops, op)
		w.deliver(ctx, op, deadline)
		if a, ok := op.FinalAnswer(); ok {
			w.learn(op, a)
		}
		if w.prof.ThinkTime > 0 {
			time.Sleep(time.Duration(w.rng.Int64N(int64(w.prof.ThinkTime))))
		}
	}
}

// next builds op seq. Keys are "op-<seq>" for every worker: the same key
// string is in use by every user at once, so a replay crossing users would
// show.
func (w *Worker) next(seq int) *Op {
	op := &Op{User: w.User, Key: fmt.Sprintf("op-%d", seq)}
	// Amounts end in the worker's id, so another user's answer can never
	// match this user's request.
	tag := int64(w.ID % 100)
	r := w.rng.Float64()
	var prior *Op
	if len(w.Ops) > 0 {
		prior = w.Ops[w.rng.IntN(len(w.Ops))]
	}
	switch {
	case r < 0.06 && prior != nil && prior.Kind != OpReuse && !prior.Late:
		if _, ok := prior.FinalAnswer(); ok {
			// The same key with another amount: 422, nothing moves.
			op.Kind, op.Key, op.Reused = OpReuse, prior.Key, prior
			op.Path = prior.Path
			op.Body = w.body(prior.Path, "USD", "EUR", 100*(1_000_000+int64(seq))+tag)
			return op
		}
		fallthrough
	case r < 0.09:
		op.Kind, op.Path = OpInvalid, "/v1/deposits"
		op.Body = w.body(op.Path, "XTS", "", 100*int64(1000+seq)+tag)
		return op
	}
	src, srcBal := w.richest()
	if srcBal < 100*1000 || w.rng.Float64() < 0.4 {
		op.Kind, op.Path = OpDeposit, "/v1/deposits"
		cur := depositCurrencies[w.rng.IntN(len(depositCurrencies))]
		// Every amount of this user is distinct, so a business row names
		// the op that made it even without its key.
		op.Body = w.body(op.Path, cur, "", 100*(10_000+int64(seq))+tag)
		return op
	}
	op.Kind, op.Path = OpTransaction, "/v1/transactions"
	dst := src
	for dst == src {
		dst = depositCurrencies[w.rng.IntN(len(depositCurrencies))]
	}
	// Amounts grow with seq, so no two live transactions of this user ever
	// share currencies and amount in a minute: the minute net must never
	// fire, and a 409 without Retry-After would mean a duplicate got through.
	amount := 100*(100+int64(seq)) + tag
	if w.rng.Float64() < 0.1 || amount > srcBal {
		amount = srcBal + 100*(1_000_000+int64(seq)) + tag // 402, stored and replayed
	}
	op.Body = w.body(op.Path, src, dst, amount)
	return op
}

func (w *Worker) body(path, cur, dst string, amount int64) []byte {
	var v any
	if path == "/v1/deposits" {
		v = struct {
			Currency string `json:"currency"`
			Amount   int64  `json:"amount"`
		}{cur, amount}
	} else {
		v = struct {
			Source string `json:"source_currency"`
			Target string `json:"target_currency"`
			Amount int64  `json:"amount"`
		}{cur, dst, amount}
	}
	b, _ := json.Marshal(v)
	return b
}

func (w *Worker) richest() (string, int64) {
	best, bal := "USD", int64(-1)
	for _, c := range []string{"USD", "EUR", "GBP", "JPY"} {
		if w.known[c] > bal {
			best, bal = c, w.known[c]
		}
	}
	return best, bal
}

// deliver sends op the way one kind of caller does, to a final answer.
func (w *Worker) deliver(ctx context.Context, op *Op, deadline time.Time) {
	r := w.rng.Float64()
	switch {
	case r < w.prof.DoubleTap:
		// Two taps on "Pay": the same key twice at once, each with its own
		// retries.
		op.Scenario = "double-tap"
		w.stats.DoubleTaps.Add(1)
		var wg sync.WaitGroup
		for leg := range 2 {
			wg.Go(func() {
				if leg == 1 {
					time.Sleep(time.Duration(w.rng.Int64N(int64(5 * time.Millisecond))))
				}
				w.client.UntilFinal(ctx, op, deadline, false)
			})
		}
		wg.Wait()
	case r < w.prof.DoubleTap+w.prof.Drop:
		// The connection drops right after the request is sent; the app
		// retries when the network is back.
		op.Scenario = "drop"
		w.client.Drop(op, time.Duration(w.rng.Int64N(int64(20*time.Millisecond))), w.rng.IntN(2) == 0)
		time.Sleep(50*time.Millisecond + time.Duration(w.rng.Int64N(int64(250*time.Millisecond))))
		w.client.UntilFinal(ctx, op, deadline, true)
	default:
		op.Scenario = "sdk"
		w.client.UntilFinal(ctx, op, deadline, false)
	}
}

// learn updates the worker's view of its balances from a final answer.
func (w *Worker) learn(op *Op, a Attempt) {
	if a.Status/100 != 2 {
		return
	}
	switch op.Kind {
	case OpDeposit:
		var d depositBody
		if json.Unmarshal(a.Body, &d) == nil {
			w.known[d.Currency] += d.Amount
		}
	case OpTransaction:
		var t transactionBody
		if json.Unmarshal(a.Body, &t) == nil {
			w.known[t.SourceCurrency] -= t.Amount
			w.known[t.TargetCurrency] += t.ConvertedAmount
		}
	}
}

// Recheck sends every op with a final answer once more, long after it was
// answered and after every fault: the answer must be the same, byte for
// byte, and a replay.
func (w *Worker) Recheck(ctx context.Context) {
	step := 1
	if n := w.prof.MaxRechecks; n > 0 && len(w.Ops) > n {
		step = (len(w.Ops) + n - 1) / n // an even sample
	}
	for i, op := range w.Ops {
		if i%step != 0 {
			continue
		}
		// A late op's key has a short retention: asked again now, it may
		// rightly run afresh.
		if _, ok := op.FinalAnswer(); !ok || op.Late || ctx.Err() != nil {
			continue
		}
		w.stats.Rechecks.Add(1)
		w.client.Send(ctx, op)
	}
}

// depositBody and transactionBody are paymentsd's 201 bodies.
type depositBody struct {
	ID        string `json:"id"`
	Currency  string `json:"currency"`
	Amount    int64  `json:"amount"`
	CreatedAt string `json:"created_at"`
}

type transactionBody struct {
	ID              string `json:"id"`
	SourceCurrency  string `json:"source_currency"`
	TargetCurrency  string `json:"target_currency"`
	Amount          int64  `json:"amount"`
	ConvertedAmount int64  `json:"converted_amount"`
	Rate            string `json:"rate"`
	Status          string `json:"status"`
	CreatedAt       string `json:"created_at"`
}

// LateWorker is the caller who comes back hours later: it makes a few
// deposits, waits until their keys' retention (a short TTL on a replica of
// its own, the one place the harness shortens it) has passed, and uses
// each key again. The key's second life deposits another amount: the
// same deposit again within a minute would meet the deposits' minute net
// (docs/paymentsd.md), which only the short TTL, not the service, makes
// possible; a key past retention binds nothing, whatever the body.
type LateWorker struct {
	*Worker
	ttl time.Duration
}

// Run makes the deposits, waits past the TTL, and retries them.
func (w *LateWorker) Run(ctx context.Context, deadline time.Time) {
	var firsts []*Op
	amount := func(seq int) int64 { return 100*(10_000+int64(seq)) + int64(w.ID%100) }
	for seq := range w.prof.LateOps {
		op := &Op{User: w.User, Key: fmt.Sprintf("op-%d", seq), Kind: OpDeposit, Path: "/v1/deposits",
			Late: true, Scenario: "late-first"}
		op.Body = w.body(op.Path, "USD", "", amount(seq))
		w.Ops = append(w.Ops, op)
		firsts = append(firsts, op)
		w.client.UntilFinal(ctx, op, deadline, false)
	}
	// "Hours later": past the key's retention, and past a sweep.
	select {
	case <-ctx.Done():
		return
	case <-time.After(w.ttl + 2*time.Second):
	}
	for seq, first := range firsts {
		again := &Op{User: first.User, Key: first.Key, Kind: first.Kind, Path: first.Path,
			Body: w.body(first.Path, "USD", "", amount(seq)+50), Late: true, Scenario: "late-retry"}
		w.Ops = append(w.Ops, again)
		w.stats.LateRetries.Add(1)
		w.client.UntilFinal(ctx, again, deadline, true)
	}
}
