package chaos

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	paymentsapi "github.com/idem-dev/idem/payments/api"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bankFaults are bankd's faults while the run's faults last: every kind,
// each a few percent of the transfer requests, the slow and hung ones
// most: they keep bank calls in flight for the kills to land in.
const bankFaults = "error-before=0.04,error-after=0.04,slow-after=0.08,reset-after=0.04,hang=0.04"

// PayoutProfile sizes the payouts of a run.
type PayoutProfile struct {
	// Callers send payouts, each as a user of its own.
	Callers int
	// BankFaults is bankd's --faults while the faults run; off after.
	BankFaults string
	// BankTimeout is paymentsd's --bank-timeout; SlowDelay bankd's
	// --slow-delay, longer, so a slow answer is an unknown outcome.
	BankTimeout, SlowDelay time.Duration
	// CompleteInterval is paymentsd's --complete-interval.
	CompleteInterval time.Duration
	// BankRestarts SIGKILLs of bankd, spread over the faults, each down
	// for BankDownFor.
	BankRestarts int
	BankDownFor  Span
	// FinalOutage: the bank is down for the last FinalOutage of the
	// faults, so the quiet period begins with payouts pending.
	FinalOutage time.Duration
	// Quiet bounds the quiet period after the callers are done, in which
	// the completers finish every pending payout.
	Quiet time.Duration
	// Reject is the share of payouts to a reject- destination (the bank
	// refuses them for good: failed, refunded); Refuse the share asking
	// more than the balance holds (402, stored).
	Reject, Refuse float64
}

// OpPayout is a POST /v1/payouts: money that leaves through the bank.
const OpPayout OpKind = "payout"

// PayoutStats counts the payouts' side of a run.
type PayoutStats struct {
	BankRestarts  atomic.Int64 // SIGKILLs and restarts of bankd under faults
	BankFaults    atomic.Int64 // faults bankd injected, from its log
	PendingAtCalm atomic.Int64 // payouts pending when the faults stopped
	QuietMillis   atomic.Int64 // from then until every payout was final
	Completed     atomic.Int64 // payouts a completer finished, from the replicas' logs
}

// PayoutWorker is a caller who pays out: it deposits so that its balance
// can pay, and sends payouts through the front proxy, in the same ways as
// every caller (SDK, double taps, dropped connections). Its deposits are
// checked with every caller's; its payouts against the bank.
type PayoutWorker struct {
	*Worker
	Payouts []*Op // written by the worker goroutine only
	pp      PayoutProfile
}

// Run makes deposits and payouts until stop, then lets the last one finish
// its retries until deadline.
func (w *PayoutWorker) Run(ctx context.Context, stop, deadline time.Time) {
	for seq := 0; seq < w.prof.MaxOps && time.Now().Before(stop) && ctx.Err() == nil; seq++ {
		op := w.next(seq)
		if op.Kind == OpPayout {
			w.Payouts = append(w.Payouts, op)
		} else {
			w.Ops = append(w.Ops, op)
		}
		w.deliver(ctx, op, deadline)
		if a, ok := op.FinalAnswer(); ok {
			w.learnPayout(op, a)
		}
		if op.Kind == OpPayout && w.rng.IntN(2) == 0 {
			w.askAgain(ctx, op, deadline)
		}
	}
}

// askAgain sends a payout answered 202 again, with its key, a few times a
// moment apart, as an app waiting for the outcome does: each send resumes
// the payout, racing the completers for it, until one finishes it.
func (w *PayoutWorker) askAgain(ctx context.Context, op *Op, deadline time.Time) {
	for range 3 {
		answers := op.Answers()
		if len(answers) == 0 || answers[len(answers)-1].Status != http.StatusAccepted || ctx.Err() != nil {
			return
		}
		time.Sleep(100*time.Millisecond + time.Duration(w.rng.Int64N(int64(500*time.Millisecond))))
		w.client.UntilFinal(ctx, op, deadline, true)
	}
}

// next builds op seq: a deposit while the balance is low (and now and
// then), else a payout. Amounts end in the worker's id and destinations
// name the op: a bank transfer names the op that asked for it.
func (w *PayoutWorker) next(seq int) *Op {
	op := &Op{User: w.User, Key: fmt.Sprintf("op-%d", seq)}
	tag := int64(w.ID % 100)
	bal := w.known["USD"]
	if bal < 100*10_000 || w.rng.Float64() < 0.2 {
		op.Kind, op.Path = OpDeposit, "/v1/deposits"
		op.Body = w.body(op.Path, "USD", "", 100*(100_000+int64(seq))+tag)
		return op
	}
	op.Kind, op.Path = OpPayout, "/v1/payouts"
	dest := fmt.Sprintf("acct-%d-%d", w.ID, seq)
	if w.rng.Float64() < w.pp.Reject {
		dest = "reject-" + dest
	}
	amount := 100*(100+int64(seq)) + tag
	if w.rng.Float64() < w.pp.Refuse {
		amount = bal + 100*(1_000_000+int64(seq)) + tag
	}
	op.Body, _ = json.Marshal(payoutRequest{Currency: "USD", Amount: amount, Destination: dest})
	return op
}

type payoutRequest struct {
	Currency    string `json:"currency"`
	Amount      int64  `json:"amount"`
	Destination string `json:"destination"`
}

// learnPayout updates the worker's view of its balance: a payout paid or
// pending took its amount.
func (w *PayoutWorker) learnPayout(op *Op, a Attempt) {
	if op.Kind != OpPayout {
		w.learn(op, a)
		return
	}
	var p paymentsapi.PayoutView
	if a.Status/100 == 2 && json.Unmarshal(a.Body, &p) == nil && p.Status != "failed" {
		w.known[p.Currency] -= p.Amount
	}
}

// Recheck asks every payout with a final answer again, after the quiet
// period: each is final by then, and the answer a replay of it.
func (w *PayoutWorker) Recheck(ctx context.Context) {
	w.Worker.Recheck(ctx)
	for _, op := range w.Payouts {
		if _, ok := op.FinalAnswer(); ok && ctx.Err() == nil {
			w.stats.Rechecks.Add(1)
			w.client.Send(ctx, op)
		}
	}
}

// payoutRun is the payouts' part of one mode's run: the bank, its faults,
// the callers who pay out, the quiet period and the checks.
type payoutRun struct {
	prof    PayoutProfile
	bank    *Bankd
	secret  string // the file with the replicas' bank key secret
	logDir  string // the replicas' logs
	users   []*User
	workers []*PayoutWorker
	stats   *Stats
	logf    func(string, ...any)
	faults  sync.WaitGroup // the bank's restarts under faults
	quiet   chan struct{}  // closed when the quiet period's watch ends
	// What the quiet period left: payouts pending, records unfinished.
	stuck      map[string]bool
	unfinished []userKey
}

// newPayoutRun starts the bank, with its faults on, in dir.
func newPayoutRun(ctx context.Context, p Profile, bankd, dir string, users []*User, stats *Stats, seed uint64, logf func(string, ...any)) (*payoutRun, error) {
	r := &payoutRun{prof: p.Payouts, users: users, stats: stats, logf: logf, secret: filepath.Join(dir, "bank-key-secret"), logDir: dir}
	secret := make([]byte, 32)
	_, _ = crand.Read(secret)
	if err := os.WriteFile(r.secret, []byte(hex.EncodeToString(secret)), 0o600); err != nil {
		return nil, err
	}
	var err error
	if r.bank, err = NewBankd(bankd, dir, r.prof.SlowDelay, seed); err != nil {
		return nil, err
	}
	return r, r.bank.Start(ctx, r.prof.BankFaults)
}

// serveArgs are the replicas' payout flags.
func (r *payoutRun) serveArgs() []string {
	return []string{"--bank-url", r.bank.URL(), "--bank-key-secret-file", r.secret,
		"--bank-timeout", r.prof.BankTimeout.String(), "--complete-interval", r.prof.CompleteInterval.String()}
}

// startWorkers makes a caller per user, through base.
func (r *payoutRun) startWorkers(base string, p Profile, first int, seed uint64) {
	for i, u := range r.users {
		r.workers = append(r.workers, &PayoutWorker{Worker: NewWorker(first+i, u, base, p, r.stats, seed+uint64(i)), pp: r.prof})
	}
}

// run sends the payout callers until stop; callers waits for them.
func (r *payoutRun) run(ctx context.Context, callers *sync.WaitGroup, stop, deadline time.Time) {
	for _, w := range r.workers {
		callers.Go(func() { w.Run(ctx, stop, deadline) })
	}
}

// injectFaults SIGKILLs the bank BankRestarts times, evenly spread over
// the d the faults last, and starts it again on its port and file, its
// faults on; then once more FinalOutage before the faults end, to be
// started again, without faults, by calm.
func (r *payoutRun) injectFaults(faults context.Context, d time.Duration, seed uint64) {
	n := r.prof.BankRestarts
	rng := rand.New(rand.NewPCG(seed, 0xba4d))
	every := (d - r.prof.FinalOutage) / time.Duration(n+1)
	end, _ := faults.Deadline()
	r.faults.Go(func() {
		for range n {
			if wait(faults, every); faults.Err() != nil {
				return
			}
			r.bank.Kill()
			wait(faults, r.prof.BankDownFor.Min+time.Duration(rng.Int64N(int64(r.prof.BankDownFor.Max-r.prof.BankDownFor.Min)+1)))
			if err := r.bank.Start(context.WithoutCancel(faults), r.prof.BankFaults); err != nil {
				r.logf("%v", err)
				continue
			}
			r.stats.Payouts.BankRestarts.Add(1)
			r.logf("bankd killed and restarted on %s", r.bank.URL())
		}
		// The last outage: down until the faults end, when calm starts it
		// again.
		if wait(faults, time.Until(end.Add(-r.prof.FinalOutage))); faults.Err() == nil && r.bank.Kill() {
			r.stats.Payouts.BankRestarts.Add(1)
			r.logf("bankd killed; down until the faults end")
		}
	})
}

// calm waits for the bank's restarts to end and starts it again without
// faults: from now on every transfer request gets its answer. The quiet
// period begins: it watches the payouts until the completers have taken
// every pending one to paid or failed.
func (r *payoutRun) calm(ctx context.Context, db *pgxpool.Pool) error {
	r.faults.Wait()
	r.bank.Kill()
	if err := r.bank.Start(ctx, ""); err != nil {
		return err
	}
	calm := time.Now()
	r.quiet = make(chan struct{})
	go func() {
		defer close(r.quiet)
		for first := true; time.Since(calm) < r.prof.Quiet && ctx.Err() == nil; first = false {
			stuck, unfinished, err := unfinishedPayouts(ctx, db)
			if first && err == nil {
				r.stats.Payouts.PendingAtCalm.Store(int64(len(stuck)))
			}
			if err == nil && len(stuck)+len(unfinished) == 0 {
				break
			}
			wait(ctx, 100*time.Millisecond)
		}
		r.stats.Payouts.QuietMillis.Store(time.Since(calm).Milliseconds())
	}()
	return nil
}

// settle ends the quiet period once the callers are done: it waits, up to
// Quiet more, until no payout is pending and no record unfinished, and
// keeps what is still unfinished then for the checks.
func (r *payoutRun) settle(ctx context.Context, db *pgxpool.Pool) error {
	<-r.quiet
	deadline := time.Now().Add(r.prof.Quiet)
	for {
		stuck, unfinished, err := unfinishedPayouts(ctx, db)
		if err != nil {
			return err
		}
		if len(stuck)+len(unfinished) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			r.stuck, r.unfinished = stuck, unfinished
			r.stats.Payouts.BankFaults.Store(int64(r.bank.FaultsInjected()))
			r.stats.Payouts.Completed.Store(int64(completerFinished(r.logDir)))
			r.logf("quiet period: %d payouts pending when the faults stopped, all final %s later; %d pending and %d records unfinished now",
				r.stats.Payouts.PendingAtCalm.Load(), time.Duration(r.stats.Payouts.QuietMillis.Load())*time.Millisecond, len(stuck), len(unfinished))
			return nil
		}
		wait(ctx, 200*time.Millisecond)
	}
}

// unfinishedPayouts lists the payouts pending and the records unfinished.
func unfinishedPayouts(ctx context.Context, db *pgxpool.Pool) (map[string]bool, []userKey, error) {
	stuck, unfinished := map[string]bool{}, []userKey(nil)
	err := each(ctx, db, `SELECT 'payout', user_id::text, id::text FROM payouts WHERE status = 'pending'
		UNION ALL SELECT 'record', scope, idempotency_key FROM idempotency_keys
		WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED'`,
		func(row pgx.Rows) error {
			var kind, user, id string
			if err := row.Scan(&kind, &user, &id); err != nil {
				return err
			}
			if kind == "payout" {
				stuck[id] = true
			} else {
				unfinished = append(unfinished, userKey{user, id})
			}
			return nil
		})
	return stuck, unfinished, err
}

// completerFinished counts the payouts the completers finished (201, paid
// or failed; not a replay of a retry's answer), from the request lines of
// the replicas' logs in dir.
func completerFinished(dir string) int {
	logs, _ := filepath.Glob(filepath.Join(dir, "replica*.log"))
	n := 0
	for _, name := range logs {
		b, _ := os.ReadFile(name)
		for line := range bytes.Lines(b) {
			if bytes.Contains(line, []byte(" route=completer ")) && bytes.Contains(line, []byte(" outcome=executed status=201 ")) {
				n++
			}
		}
	}
	return n
}

// recheck asks every caller's payouts again.
func (r *payoutRun) recheck(ctx context.Context, rechecks *sync.WaitGroup) {
	for _, w := range r.workers {
		rechecks.Go(func() { w.Recheck(ctx) })
	}
}

// ops are the payout callers' deposits, checked with everyone's.
func (r *payoutRun) ops() []*Op {
	var ops []*Op
	for _, w := range r.workers {
		ops = append(ops, w.Ops...)
	}
	return ops
}

// verify checks the payouts against the database and the bank.
func (r *payoutRun) verify(ctx context.Context, v *Verdict, db *pgxpool.Pool, api *Client) error {
	transfers, err := r.bank.Transfers(ctx)
	if err != nil {
		return err
	}
	st, err := loadPayoutState(ctx, db, transfers, r.stuck, r.unfinished)
	if err != nil {
		return err
	}
	var payouts, deposits []*Op
	for _, w := range r.workers {
		payouts = append(payouts, w.Payouts...)
		deposits = append(deposits, w.Ops...)
	}
	checkPayouts(v, st, payouts)
	checkPayoutBalances(v, st, deposits, r.users)
	checkPayoutReads(ctx, v, st, api, r.users)
	return nil
}

// close stops the bank and drops the callers' connections.
func (r *payoutRun) close() {
	r.faults.Wait()
	r.bank.Kill()
	for _, w := range r.workers {
		w.Close()
	}
}
