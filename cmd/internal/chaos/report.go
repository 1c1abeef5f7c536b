package chaos

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// Stats counts what happened during a run. Every field is updated
// atomically by whoever sees the event.
type Stats struct {
	Requests        atomic.Int64 // requests the callers sent, dropped ones included
	Retries         atomic.Int64 // sends of a key after its first, by the SDK
	DoubleTaps      atomic.Int64 // ops sent twice at once
	Drops           atomic.Int64 // requests whose connection the caller dropped
	BalancerRetries atomic.Int64 // requests the front proxy sent to another replica
	Upstream        atomic.Int64 // requests the front proxy sent to a replica
	Replays         atomic.Int64 // answers with Idempotent-Replayed: true
	InFlight        atomic.Int64 // 409 with Retry-After: in flight
	LockLost        atomic.Int64 // 409 with Retry-After: the lease went to a retry, this attempt rolled back
	NetRefusals     atomic.Int64 // 409 without Retry-After: a business net fired
	ServerErrors    atomic.Int64 // 5xx
	NoResponse      atomic.Int64 // timeouts, broken connections
	Kills           atomic.Int64 // SIGKILLs of replicas
	Pauses          atomic.Int64 // SIGSTOPs of replicas, past the lock timeout
	UnplannedExits  atomic.Int64 // replicas that died without a SIGKILL from us
	DBFaultErrors   atomic.Int64 // database disruptions that did not complete (a node that did not rejoin)
	LateRetries     atomic.Int64 // retries after the key's retention
	Rechecks        atomic.Int64 // final answers asked for again after the faults
	Races           atomic.Int64 // staged races of a request slowed past its lease and its retry
	ConnFaults      [4]atomic.Int64
	// The queue phase (queue.go).
	QueuePublishes     atomic.Int64 // commands published, copies and retries included
	QueuePublishErrors atomic.Int64 // publishes JetStream did not acknowledge, published again
	QueueDuplicates    atomic.Int64 // deliberate copies of a publish
	QueueRepublishes   atomic.Int64 // publishes again after no answer came in time
	QueueAnswers       atomic.Int64 // answers published to the commands' reply subjects
	QueueReplays       atomic.Int64 // of which replays
	QueueHeardOnly     atomic.Int64 // of which a subscription heard, the answers stream missed
	BrokerRestarts     atomic.Int64 // NATS nodes SIGKILLed and started again
	BrokerLeaderKills  atomic.Int64 // of which the leader of PAYMENTS
	Payouts            PayoutStats

	outageMu sync.Mutex
	outages  []Disruption // guarded by outageMu: the database disruptions, in order
}

func (s *Stats) addOutage(d Disruption) {
	s.outageMu.Lock()
	defer s.outageMu.Unlock()
	s.outages = append(s.outages, d)
}

// Outages returns the database disruptions, in the order they happened.
func (s *Stats) Outages() []Disruption {
	s.outageMu.Lock()
	defer s.outageMu.Unlock()
	return append([]Disruption(nil), s.outages...)
}

// ConnFaultTotal is the number of connection faults of every kind.
func (s *Stats) ConnFaultTotal() int64 {
	var n int64
	for i := range s.ConnFaults {
		n += s.ConnFaults[i].Load()
	}
	return n
}

// Verdict is what the checks found. The fields marked must-be-0 fail the
// run.
type Verdict struct {
	Keys           int // ops: distinct (user, key, body)
	Executed       int // ops that moved money
	DoubleEffects  int // must be 0: a key with more than one business effect
	LostWrites     int // must be 0: a 2xx a caller got that the database does not hold as given
	NoFinal        int // must be 0: ops still without a final answer
	UnackedEffects int // must be 0: money moved for an op whose final answer said it did not
	WrongAnswers   int // must be 0: answers to one key that differ, or do not fit the request
	Foreign        int // must be 0: an answer naming another user's resource
	BalanceErrors  int // must be 0: a balance that differs from the acknowledged movements
	LiveLocks      int // must be 0: PROCESSING rows with a live lock after the lock timeout
	DBFaults       int // must be 0: database disruptions that did not complete (no write accepted, a node that did not rejoin)
	LateReexecuted int // retries after the TTL that ran again
	LateRefused    int // retries after the TTL that a business net refused (each also a wrong answer)
	// The queue phase (verify_queue.go).
	QueueCommands   int // commands: distinct (user, key, body)
	QueueDouble     int // must be 0: a key with more than one effect, or an effect not exactly its amounts
	QueueLost       int // must be 0: a command JetStream acknowledged that never took effect and has no final refusal
	QueueUnanswered int // must be 0: a command without a final answer published
	QueueDisagree   int // must be 0: an answer that differs from another, the stored record, the ledger, or the request
	QueueOtherBody  int // must be 0: a key used again with another body that moved money or was not refused 422
	Payouts         PayoutVerdict
	// Gateway is the gateway phase's verdict, nil in a mode's; the other
	// figures but DBFaults are the modes'.
	Gateway *GatewayVerdict
	Details []string
}

// Invariants are the must-be-0 figures, in the order the table lists them.
func (v *Verdict) Invariants() []int {
	if v.Gateway != nil {
		return append(v.Gateway.invariants(), v.DBFaults)
	}
	return append([]int{v.DoubleEffects, v.LostWrites, v.NoFinal, v.UnackedEffects, v.WrongAnswers, v.Foreign, v.BalanceErrors, v.LiveLocks, v.DBFaults,
		v.QueueDouble, v.QueueLost, v.QueueUnanswered, v.QueueDisagree, v.QueueOtherBody},
		v.Payouts.invariants()...)
}

// Failed reports whether a must-be-0 figure is not 0.
func (v *Verdict) Failed() bool {
	for _, n := range v.Invariants() {
		if n != 0 {
			return true
		}
	}
	return false
}

// Tally counts the invariants that held and those that did not, over every
// mode; a mode that could not run fails all of its invariants.
func Tally(results []*Result) (passed, failed int) {
	for _, r := range results {
		if r.Err != nil || r.Verdict == nil {
			empty := &Verdict{}
			if r.Mode == GatewayPhase {
				empty.Gateway = &GatewayVerdict{}
			}
			failed += len(empty.Invariants())
			continue
		}
		for _, n := range r.Verdict.Invariants() {
			if n == 0 {
				passed++
			} else {
				failed++
			}
		}
	}
	return passed, failed
}

func (v *Verdict) fail(counter *int, format string, args ...any) {
	*counter++
	if len(v.Details) < 200 {
		v.Details = append(v.Details, fmt.Sprintf(format, args...))
	}
}

// Result is one mode's run.
type Result struct {
	Mode    string
	Elapsed time.Duration
	Stats   *Stats
	Verdict *Verdict
	Err     error // the run itself failed (setup, a process that would not start)
}

// Failed reports whether the mode failed.
func (r *Result) Failed() bool { return r.Err != nil || r.Verdict == nil || r.Verdict.Failed() }

// PrintTable writes the one table of a run: a column per mode.
func PrintTable(out io.Writer, p Profile, results []*Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{""}
	for _, r := range results {
		head = append(head, r.Mode)
	}
	row := func(name string, f func(*Result) string) {
		cells := []string{name}
		for _, r := range results {
			cells = append(cells, f(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	n := func(f func(*Stats) int64) func(*Result) string {
		return func(r *Result) string { return fmt.Sprint(f(r.Stats)) }
	}
	v := func(f func(*Verdict) int) func(*Result) string {
		return func(r *Result) string {
			if r.Verdict == nil {
				return "-"
			}
			return fmt.Sprint(f(r.Verdict))
		}
	}
	// The rows of paymentsd's checks say nothing of the gateway phase.
	modeRow := func(name string, f func(*Result) string) {
		row(name, func(r *Result) string {
			if r.Mode == GatewayPhase {
				return "-"
			}
			return f(r)
		})
	}
	fmt.Fprintf(out, "chaos: profile %s: %d replicas behind a retrying front proxy, %d callers (%d through idem-gateway), %s of faults per mode\n\n",
		p.Name, p.Replicas, p.Workers, p.Gateway.Callers, p.Duration)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	row("requests", n(func(s *Stats) int64 { return s.Requests.Load() }))
	row("retries", n(func(s *Stats) int64 { return s.Retries.Load() }))
	row("duplicates sent", n(func(s *Stats) int64 {
		return s.Retries.Load() + s.DoubleTaps.Load() + s.BalancerRetries.Load()
	}))
	row("  double taps", n(func(s *Stats) int64 { return s.DoubleTaps.Load() }))
	row("  dropped connections", n(func(s *Stats) int64 { return s.Drops.Load() }))
	row("  front-proxy retries", n(func(s *Stats) int64 { return s.BalancerRetries.Load() }))
	row("replays received", n(func(s *Stats) int64 { return s.Replays.Load() }))
	row("409 in flight (Retry-After)", n(func(s *Stats) int64 { return s.InFlight.Load() }))
	row("409 lock lost, fenced (Retry-After)", n(func(s *Stats) int64 { return s.LockLost.Load() }))
	modeRow("409 business net (final)", n(func(s *Stats) int64 { return s.NetRefusals.Load() }))
	row("5xx / no response", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Stats.ServerErrors.Load(), r.Stats.NoResponse.Load())
	})
	row("replicas killed", n(func(s *Stats) int64 { return s.Kills.Load() }))
	row("replicas frozen past the lock timeout", n(func(s *Stats) int64 { return s.Pauses.Load() }))
	row("replica exits not ours", n(func(s *Stats) int64 { return s.UnplannedExits.Load() }))
	row("connection faults", n(func(s *Stats) int64 { return s.ConnFaultTotal() }))
	row("  slow / cut / reset / hang", func(r *Result) string {
		c := &r.Stats.ConnFaults
		return fmt.Sprintf("%d / %d / %d / %d", c[0].Load(), c[1].Load(), c[2].Load(), c[3].Load())
	})
	modeRow("lease races staged", n(func(s *Stats) int64 { return s.Races.Load() }))
	row("database restarts / primary kills", func(r *Result) string { return fmt.Sprint(len(r.Stats.Outages())) })
	row("  time to the first accepted write", func(r *Result) string {
		var ds []string
		for _, d := range r.Stats.Outages() {
			ds = append(ds, d.Took.Round(100*time.Millisecond).String())
		}
		return strings.Join(ds, " ")
	})
	// A database with disruptions of several kinds (Citus: a worker
	// restart, a shard move) says which came when, a row for each.
	named := 0
	for _, r := range results {
		for i, d := range r.Stats.Outages() {
			if d.What != "" {
				named = max(named, i+1)
			}
		}
	}
	for i := range named {
		row(fmt.Sprintf("  %d: what, seconds into the faults", i+1), func(r *Result) string {
			ds := r.Stats.Outages()
			if i >= len(ds) || ds[i].What == "" {
				return "-"
			}
			return fmt.Sprintf("%s at %.0fs", ds[i].What, ds[i].At.Seconds())
		})
	}
	row("  disruptions not completed (must be 0)", v(func(v *Verdict) int { return v.DBFaults }))
	modeRow("operations (a key and its body)", v(func(v *Verdict) int { return v.Keys }))
	modeRow("operations that moved money", v(func(v *Verdict) int { return v.Executed }))
	modeRow("retries after the TTL: ran again / refused (refused must be 0)", func(r *Result) string {
		if r.Verdict == nil {
			return "-"
		}
		return fmt.Sprintf("%d / %d", r.Verdict.LateReexecuted, r.Verdict.LateRefused)
	})
	modeRow("double effects (must be 0)", v(func(v *Verdict) int { return v.DoubleEffects }))
	modeRow("lost acknowledged writes (must be 0)", v(func(v *Verdict) int { return v.LostWrites }))
	modeRow("keys without a final answer (must be 0)", v(func(v *Verdict) int { return v.NoFinal }))
	modeRow("effects behind a refusal (must be 0)", v(func(v *Verdict) int { return v.UnackedEffects }))
	modeRow("inconsistent answers (must be 0)", v(func(v *Verdict) int { return v.WrongAnswers }))
	modeRow("another user's response (must be 0)", v(func(v *Verdict) int { return v.Foreign }))
	modeRow("balance mismatches (must be 0)", v(func(v *Verdict) int { return v.BalanceErrors }))
	modeRow("live locks after lock timeout (must be 0)", v(func(v *Verdict) int { return v.LiveLocks }))
	queueRows(modeRow, n, v)
	payoutRows(modeRow)
	gatewayRows(row)
	row("elapsed", func(r *Result) string { return r.Elapsed.Round(time.Second).String() })
	row("result", func(r *Result) string {
		switch {
		case r.Err != nil:
			return "ERROR"
		case r.Failed():
			return "FAIL"
		}
		return "PASS"
	})
	_ = tw.Flush()
}

// queueRows are the queue phase's rows of the table.
func queueRows(row func(string, func(*Result) string), n func(func(*Stats) int64) func(*Result) string, v func(func(*Verdict) int) func(*Result) string) {
	row("queue: commands (a key and its body)", v(func(v *Verdict) int { return v.QueueCommands }))
	row("  publishes / not acknowledged", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Stats.QueuePublishes.Load(), r.Stats.QueuePublishErrors.Load())
	})
	row("  copies sent / published again unanswered", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Stats.QueueDuplicates.Load(), r.Stats.QueueRepublishes.Load())
	})
	row("  answers / of them replays", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Stats.QueueAnswers.Load(), r.Stats.QueueReplays.Load())
	})
	row("  answers the answers stream missed, a subscription heard", n(func(s *Stats) int64 { return s.QueueHeardOnly.Load() }))
	row("  NATS nodes SIGKILLed / PAYMENTS leaders", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Stats.BrokerRestarts.Load(), r.Stats.BrokerLeaderKills.Load())
	})
	row("queue: double effects (must be 0)", v(func(v *Verdict) int { return v.QueueDouble }))
	row("queue: lost commands (must be 0)", v(func(v *Verdict) int { return v.QueueLost }))
	row("queue: commands never answered (must be 0)", v(func(v *Verdict) int { return v.QueueUnanswered }))
	row("queue: answers unlike the record (must be 0)", v(func(v *Verdict) int { return v.QueueDisagree }))
	row("queue: another body moved money (must be 0)", v(func(v *Verdict) int { return v.QueueOtherBody }))
}
