package chaos

import (
	"fmt"
	"time"
)

// Span is a random duration between Min and Max.
type Span struct{ Min, Max time.Duration }

// Profile sizes a run: how many replicas and callers, for how long, and how
// hard the faults come.
type Profile struct {
	Name     string
	Replicas int
	Workers  int
	// Duration is how long traffic runs under faults, per mode.
	Duration time.Duration
	// Drain bounds how long callers may keep retrying after the faults stop.
	Drain time.Duration
	// LeaseDuration is paymentsd's --lease-duration: short, so the leases of
	// killed replicas expire quickly.
	LeaseDuration time.Duration
	// UpstreamTimeout is how long the front proxy waits for a replica's
	// response headers before it tries another; BalancerAttempts is how
	// many replicas it tries.
	UpstreamTimeout  time.Duration
	BalancerAttempts int
	SDK              SDKConfig
	// Patient is the share of callers that go through a second front
	// proxy, with their own SDK, both waiting several lock timeouts (as a
	// load balancer with a 60 s timeout would): a request they sent to a
	// frozen replica is still wanted when it wakes up past its lease, so
	// its completion meets the fencing token.
	Patient float64
	// DoubleTap and Drop are the shares of ops sent as a double tap, and
	// sent on a connection the caller drops at once; the rest go through
	// the SDK alone.
	DoubleTap, Drop float64
	MaxOps          int // per worker
	// MaxRechecks bounds how many answered ops per worker are asked again
	// after the faults (an even sample); 0 asks them all.
	MaxRechecks int
	ThinkTime   time.Duration
	// KillEvery: a SIGKILL of a random replica; it is restarted after
	// RestartAfter.
	KillEvery, RestartAfter Span
	// FaultEvery: a fault on a random replica's database link, lasting
	// FaultFor; zero for none (the replicas then connect directly).
	FaultEvery, FaultFor Span
	// RaceEvery: a staged race of a request slowed past its lease and its
	// retry on another replica (see Racer); 0 for none.
	RaceEvery time.Duration
	// DBRestarts disruptions of PostgreSQL, spread over Duration: fast
	// restarts of a cluster, SIGKILLs of a formation's primary.
	DBRestarts int
	// LateOps deposits by a caller who retries them after LateTTL, the
	// retention of a replica of its own.
	LateOps int
	LateTTL time.Duration
	// The queue phase (queue.go): QueueProducers users publish commands to
	// the replicas over NATS JetStream, QueueLanes at a time each, while
	// the faults last; 0 producers for none. QueueTimeout is how long one
	// waits for an answer before publishing again; QueueQuiet, after the
	// faults, bounds the wait for the last answers: past the broker's ack
	// wait (30 s, paymentsd's), so that a fire-once command held by a
	// killed replica is redelivered. The broker is a JetStream cluster of
	// BrokerNodes nats-server processes, every stream with as many
	// replicas; BrokerRestarts SIGKILLs of a node, spread over Duration,
	// the leader of PAYMENTS first, then of the durable consumer, in turn,
	// each down for BrokerDown: longer than QueueTimeout and a publish's
	// wait for its acknowledgement (2 s) together, so that a publish in
	// flight to the killed leader is sent again and may yet be stored
	// twice.
	QueueProducers, QueueLanes int
	QueueTimeout, QueueQuiet   time.Duration
	BrokerNodes                int
	BrokerRestarts             int
	BrokerDown                 time.Duration
	// Payouts is the money that leaves: a bank, its faults, its callers.
	Payouts PayoutProfile
	// Gateway sizes the gateway phase (-modes gateway; gateway.go), which
	// runs idem-gateway replicas, Replicas of them, under the same faults.
	Gateway GatewayProfile
}

// Profiles are the built-in profiles.
var Profiles = map[string]Profile{
	// short runs in CI: both modes in about two minutes on two cores.
	"short": {
		Name: "short", Replicas: 3, Workers: 6,
		Duration: 20 * time.Second, Drain: 30 * time.Second, LeaseDuration: 2 * time.Second,
		UpstreamTimeout: 1500 * time.Millisecond, BalancerAttempts: 3,
		SDK:     SDKConfig{Timeout: 4 * time.Second, MaxAttempts: 200, BaseBackoff: 25 * time.Millisecond, MaxBackoff: time.Second},
		Patient: 0.34, DoubleTap: 0.12, Drop: 0.10, MaxOps: 100_000,
		KillEvery: Span{1500 * time.Millisecond, 3500 * time.Millisecond}, RestartAfter: Span{200 * time.Millisecond, 1500 * time.Millisecond},
		FaultEvery: Span{500 * time.Millisecond, 1500 * time.Millisecond}, FaultFor: Span{300 * time.Millisecond, 2 * time.Second},
		RaceEvery: 4 * time.Second, DBRestarts: 1, LateOps: 3, LateTTL: 3 * time.Second,
		QueueProducers: 3, QueueLanes: 2, QueueTimeout: 3 * time.Second, QueueQuiet: 45 * time.Second,
		BrokerNodes: 3, BrokerRestarts: 1, BrokerDown: 5500 * time.Millisecond,
		Payouts: PayoutProfile{Callers: 2, BankFaults: bankFaults, BankTimeout: time.Second, SlowDelay: 1500 * time.Millisecond,
			CompleteInterval: 500 * time.Millisecond, BankRestarts: 2, BankDownFor: Span{200 * time.Millisecond, time.Second}, FinalOutage: 2 * time.Second,
			Quiet: 30 * time.Second, Reject: 0.15, Refuse: 0.08},
		Gateway: GatewayProfile{Callers: 6, UpstreamTimeout: time.Second, SlowDelay: 1500 * time.Millisecond,
			DedupFaults: dedupFaults, PlainFaults: plainFaults, Quiet: 30 * time.Second},
	},
	// failover runs on a pg_auto_failover formation (make test-failover):
	// the primary is SIGKILLed three times, 35 s apart, each time after
	// the killed node of the last time has rejoined as a standby (on a
	// machine too slow for that, fewer times). The replicas connect
	// to every node with target_session_attrs=read-write, without link
	// faults or staged races (both need one address to proxy); replica
	// kills, bank faults and the callers are as in short, the SDK retries
	// long enough to outlast a failover. No queue phase.
	"failover": {
		Name: "failover", Replicas: 3, Workers: 6,
		Duration: 140 * time.Second, Drain: 60 * time.Second, LeaseDuration: 2 * time.Second,
		UpstreamTimeout: 1500 * time.Millisecond, BalancerAttempts: 3,
		SDK:     SDKConfig{Timeout: 4 * time.Second, MaxAttempts: 500, BaseBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
		Patient: 0.34, DoubleTap: 0.12, Drop: 0.10, MaxOps: 100_000, MaxRechecks: 1000,
		KillEvery: Span{4 * time.Second, 8 * time.Second}, RestartAfter: Span{200 * time.Millisecond, 1500 * time.Millisecond},
		DBRestarts: 3, LateOps: 3, LateTTL: 3 * time.Second,
		Payouts: PayoutProfile{Callers: 2, BankFaults: bankFaults, BankTimeout: time.Second, SlowDelay: 1500 * time.Millisecond,
			CompleteInterval: 500 * time.Millisecond, BankRestarts: 2, BankDownFor: Span{200 * time.Millisecond, time.Second}, FinalOutage: 2 * time.Second,
			Quiet: 30 * time.Second, Reject: 0.15, Refuse: 0.08},
	},
	// long is the soak: 10 minutes per mode, tens of thousands of
	// requests, dozens of kills.
	"long": {
		Name: "long", Replicas: 4, Workers: 10,
		Duration: 10 * time.Minute, Drain: time.Minute, LeaseDuration: 3 * time.Second,
		UpstreamTimeout: 2 * time.Second, BalancerAttempts: 3,
		SDK:     SDKConfig{Timeout: 5 * time.Second, MaxAttempts: 500, BaseBackoff: 25 * time.Millisecond, MaxBackoff: 2 * time.Second},
		Patient: 0.3, DoubleTap: 0.12, Drop: 0.10, MaxOps: 1_000_000, MaxRechecks: 2000,
		KillEvery: Span{5 * time.Second, 15 * time.Second}, RestartAfter: Span{200 * time.Millisecond, 3 * time.Second},
		FaultEvery: Span{time.Second, 3 * time.Second}, FaultFor: Span{300 * time.Millisecond, 4 * time.Second},
		RaceEvery: 30 * time.Second, DBRestarts: 5, LateOps: 10, LateTTL: 5 * time.Second,
		QueueProducers: 4, QueueLanes: 2, QueueTimeout: 4 * time.Second, QueueQuiet: time.Minute,
		BrokerNodes: 3, BrokerRestarts: 5, BrokerDown: 6500 * time.Millisecond,
		Payouts: PayoutProfile{Callers: 3, BankFaults: bankFaults, BankTimeout: 2 * time.Second, SlowDelay: 3 * time.Second,
			CompleteInterval: time.Second, BankRestarts: 10, BankDownFor: Span{200 * time.Millisecond, 3 * time.Second}, FinalOutage: 5 * time.Second,
			Quiet: time.Minute, Reject: 0.15, Refuse: 0.08},
		Gateway: GatewayProfile{Callers: 8, UpstreamTimeout: 1500 * time.Millisecond, SlowDelay: 2500 * time.Millisecond,
			DedupFaults: dedupFaults, PlainFaults: plainFaults, Quiet: time.Minute},
	},
}

// The citus profile runs on a Citus cluster of the harness's own (make
// chaos-citus): short's replicas, callers, kills, link faults, races,
// payouts and gateway phase, without the queue phase, for 45 s with two
// disruptions of the database 15 s apart: the worker holding the busiest
// user's shard stopped and started again, then that user's shard moved to
// the other worker, both while traffic flows.
func init() {
	p := Profiles["short"]
	p.Name, p.Duration, p.DBRestarts = "citus", 45*time.Second, 2
	p.QueueProducers, p.QueueLanes, p.BrokerNodes, p.BrokerRestarts = 0, 0, 0, 0
	p.QueueTimeout, p.QueueQuiet, p.BrokerDown = 0, 0, 0
	Profiles["citus"] = p
}

// patient returns the front-proxy timeout and SDK of the patient callers.
// Their double taps are three times as frequent: a tap that lands on a
// frozen replica while its twin takes the expired lease elsewhere is the
// race the fencing token settles.
func (p Profile) patient() (Profile, time.Duration) {
	p.SDK.Timeout = 5 * p.LeaseDuration
	p.DoubleTap = min(3*p.DoubleTap, 0.5)
	return p, 4 * p.LeaseDuration
}

// Validate reports a profile that cannot run.
func (p Profile) Validate() error {
	switch {
	case p.Replicas < 2:
		return fmt.Errorf("profile %s: at least 2 replicas (a balancer with one has nowhere to retry)", p.Name)
	case p.Workers < 1 || p.Duration <= 0 || p.Drain <= 0 || p.LeaseDuration < 100*time.Millisecond:
		return fmt.Errorf("profile %s: workers, duration, drain and lock timeout must be set", p.Name)
	case p.KillEvery.Min <= 0 || p.FaultEvery.Min < 0 || p.KillEvery.Max < p.KillEvery.Min || p.FaultEvery.Max < p.FaultEvery.Min:
		return fmt.Errorf("profile %s: fault intervals must be positive spans (link faults: zero for none)", p.Name)
	case p.FaultEvery.Min == 0 && p.RaceEvery > 0:
		return fmt.Errorf("profile %s: the staged races slow a link: they need link faults", p.Name)
	case p.QueueProducers > 0 && (p.BrokerNodes < 3 || p.BrokerNodes > 5):
		return fmt.Errorf("profile %s: the queue phase's cluster needs 3 to 5 nodes (a kill must leave a quorum; JetStream keeps at most 5 replicas)", p.Name)
	case p.Payouts.Callers < 1 || p.Payouts.BankTimeout <= 0 || p.Payouts.Quiet <= 0 || p.Payouts.BankDownFor.Max < p.Payouts.BankDownFor.Min ||
		p.Payouts.FinalOutage < 0 || p.Payouts.FinalOutage >= p.Duration:
		return fmt.Errorf("profile %s: payout callers, bank timeout, quiet period and bank downtimes must be set, the final outage shorter than the faults", p.Name)
	}
	return nil
}
