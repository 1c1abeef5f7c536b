// Package bank is a simulated bank: the downstream that payouts pay
// through, for tests, the chaos harness and the benchmark. It settles
// transfers at once, keeps them in a SQLite file, answers a retried
// Idempotency-Key with its first answer byte for byte, and, on demand,
// behaves like a bad link: it fails before or after executing, answers
// late, resets the connection or never answers (see [Faults]).
//
// It has its own idempotency, independent of the idem library: it stands
// for a third party, so nothing of ours may help it keep its promise.
// cmd/bankd serves it; docs/bankd.md is its contract.
package bank
