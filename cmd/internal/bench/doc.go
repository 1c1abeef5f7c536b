// Package bench is the load generator behind `make bench` (cmd/bench): it
// measures paymentsd on PostgreSQL against the same handlers without
// idempotency and against the bare SQL a fresh idempotent request needs.
//
// The generator is one process; every server it measures is a child
// process of its own: paymentsd (built once with go build) for the
// idempotent variants, and the generator's own binary re-executed with the
// hidden "serve" command for the bare wiring (the payments API's handlers
// and ledger with the idem middleware replaced by a pass-through). The
// ceiling variant needs no server: the generator sends the SQL through pgx
// itself.
//
// The variants of one run alternate: each round runs every variant once, a
// warm-up and then a fixed measured window, in an order rotated by one each
// round, so machine noise falls on all of them alike. The report gives, per
// variant, the median over the rounds of the throughput and of the p50 and
// p99 latency, and the ratios the targets are stated in.
//
// The growth run (Config.Growth) compares fresh and replay against a key
// table of 10 million records and an empty one. The sweep run
// (Config.Sweep, sweep.go) measures paymentsd's latency under an
// open-loop load while `paymentsd keys sweep` deletes the expired million
// of 10 million records, in windows alternating with windows where the
// sweep process is stopped. The gateway run (Config.GatewayOnly,
// gateway.go) measures idem-gateway alone, in front of an upstream in Go
// and one in Node that each make one durable INSERT per request, against
// each upstream called directly; the main run has the same variants. The
// Citus run (Config.CitusURL, citus.go) runs fresh, replay and bare on a
// Citus coordinator, each right behind the same on one PostgreSQL, and
// reads each worker's share of the requests.
package bench
