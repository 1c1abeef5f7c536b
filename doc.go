// Package idem makes unsafe HTTP requests take effect once.
//
// Payment APIs receive the same request more than once every day: an SDK
// retries after a timeout, a user taps "Confirm" twice, a load balancer
// retries on another target. The client sends an Idempotency-Key header;
// the middleware runs the first request, and every retry gets the first
// response, byte for byte, with Idempotent-Replayed: true.
//
// # Wiring
//
//	mw, err := idem.New(pgstore.New(pool), idem.Config{}) // or sqlitestore.New(db); the zero Config works
//	mux.Handle("POST /v1/payments", mw.Require(payments))
//	handler := authenticate(mux) // calls WithScope: every key is scoped by its user, say
//
// Handlers never see idempotency code: their repositories reach the
// database through the store's context accessor (pgstore.DB,
// sqlitestore.DB), which returns the request's transaction, so the
// business writes and the key's completion commit together or not at all.
// A handler that hands a key to a provider downstream gets it from
// [KeyFromContext]. [Middleware.Do] is the same promise for work that does
// not come over net/http (a gRPC method, a queue message).
//
// # Holding a key
//
// [Config.Mode] says how a request holds its key while the handler runs:
// [ModeLeased] (the default) commits the claim first and holds the key with
// a renewed, fenced lease of bounded life ([Config.MaxLeaseLife]); choose it
// when the handler calls anything outside the database. [ModeAtomic] runs
// the claim, the handler and the completion in one transaction;
// [ModeAtomicDeferred] moves the claim to the completion. docs/modes.md
// compares the three.
//
// # The request, step by step
//
// Each step is one file; read them in this order.
//
//  1. middleware.go: [Middleware.Require] and [Middleware.Optional] are
//     the entry from net/http, and serve the one place that writes an
//     HTTP response; do.go's [Middleware.Do] is the entry from other
//     doors.
//  2. request.go: admit checks the scope ([WithScope]), the key
//     ([ParseKey]) and the body (within [Config.MaxRequestBytes],
//     fingerprinted by [NewFingerprint]); anything malformed is a 4xx and
//     nothing is stored. execute answers a retry of a finished request
//     from the replay cache ([Config.ReplayCacheBytes]) or one read
//     (replay, 409 in flight, 422 reused), else runs the loop: hold, run,
//     settle. Each step returns what the next one takes: the holder to
//     hold the key with, or the answer. In an atomic mode a duplicate of a
//     request the process is executing waits for it first (running.go).
//  3. hold.go: the holder interface (hold, complete, free) and claim,
//     the one atomic INSERT … ON CONFLICT DO NOTHING, or the conditional
//     UPDATE that re-acquires a FAILED, lease-expired or expired record.
//     Never SELECT-then-INSERT.
//  4. leased.go (with lease.go, the renewals), atomic.go, deferred.go: the
//     three holders.
//  5. run.go: the handler runs with its response captured, and returns an
//     ending: final, retriable, panicked, client gone, hold ended. settle
//     is the one place an ending becomes the key's new state. A final
//     response (2xx, 3xx, 4xx but 408 and 429) is completed in the
//     handler's transaction and committed before the client sees a byte;
//     anything else rolls back and frees the key for a retry.
//  6. respond.go: what a result sends, and what a record stores of a
//     response.
//
// Errors the middleware answers itself are RFC 9457 problem responses
// ([ProblemType]), listed in docs/problems.md. The store contract is
// package store; every store passes package storetest. Package memstore
// keeps records in memory: the examples run on it, and so do the core's
// own tests.
package idem
