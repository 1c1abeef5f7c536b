// Package chaos is the harness behind cmd/chaos: it runs paymentsd replicas
// on a throwaway PostgreSQL cluster behind a front proxy that retries like a
// cloud load balancer, sends them payments from callers that retry like
// real clients, breaks replicas, their database links and the database
// while traffic flows, and then checks, from the database and from every
// answer the callers got, that each key took effect at most once and that
// no acknowledged write was lost. docs/chaos.md describes the scenarios,
// the faults and every invariant.
//
// The parts, each in its own file:
//
//	postgres.go  the Database a run uses; the throwaway cluster (initdb, pg_ctl, fast restarts)
//	formation.go  a pg_auto_failover formation whose primary is SIGKILLed (-failover)
//	netfault.go  toxiproxy, in-process, between each replica and PostgreSQL
//	replica.go   one paymentsd process: start, SIGKILL, SIGSTOP
//	faults.go    the fleet's supervisor and the fault injector
//	balancer.go  the front proxy
//	sdk.go       the callers' retrying client and what it records
//	workload.go  the callers: SDK, double taps, dropped connections, late retries
//	race.go      the staged race of a request slowed past its lease and its retry
//	bankd.go     the bank process (cmd/bankd) payouts go through: start, SIGKILL
//	payouts.go   the payout callers, the bank's faults and the quiet period
//	broker.go    the embedded NATS server with JetStream, restarted mid-run
//	queue.go     the queue phase: producers of commands over JetStream
//	gateway.go   the gateway phase: idem-gateway replicas before two upstreams (upstream/), the operator's resolve
//	verify.go    the invariants
//	verify_payouts.go  the payouts' invariants, against the bank
//	verify_queue.go  the queue phase's invariants
//	verify_gateway.go  the gateway phase's invariants, against the upstreams' own record
//	report.go    the counters and the table
//	run.go       one mode from start to verdict
package chaos
