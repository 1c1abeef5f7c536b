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
//	store := pgstore.New(pool)                    // or sqlitestore.New(db)
//	mw, err := idem.New(store, idem.Config{})     // the zero Config works
//	mux.Handle("POST /v1/payments", auth(mw.Require(payments)))
//
// The authentication middleware in front says whose request it is with
// WithScope; every key is scoped by it. Handlers never see idempotency code:
// their repositories reach the database through the store's context
// accessor (pgstore.DB, sqlitestore.DB), which returns the request's
// transaction, so the business writes and the key's completion commit
// together or not at all.
//
// # The request, step by step
//
//  1. The key is validated (ParseKey); the body is read within
//     MaxRequestBytes and fingerprinted (NewFingerprint): SHA-256 over the
//     method, the path and query, and the RFC 8785 canonical form of a JSON
//     body. Anything malformed is a 4xx and nothing is stored.
//  2. A plain read answers retries of finished requests without writing:
//     replay (COMPLETED), 422 (another request used the key), 409 (in
//     flight). This is the hot path of a retry storm. With a replay cache
//     (Config.ReplayCacheBytes) the read is in memory, and a miss goes
//     straight to the claim, which reads the record it finds.
//  3. The claim: one atomic INSERT … ON CONFLICT DO NOTHING (see
//     Keys.Insert). A record that exists but is FAILED, whose lock expired,
//     or that is past its TTL is re-acquired by a conditional UPDATE that one
//     contender wins (Keys.Reacquire). Never SELECT-then-INSERT.
//  4. The handler runs with its response captured. A final response (2xx,
//     3xx, 4xx but 408 and 429) is stored with the completion, in the
//     handler's transaction, and sent only after the commit. Anything else
//     rolls back and releases the key for a retry; a panic is re-raised
//     after that.
//
// # Two ways to hold the key
//
// ModeLeased (the default) commits the claim first and holds the key with a
// lease that is renewed while the handler runs and fenced by a token on
// every write: choose it when the handler calls anything outside the
// database. ModeAtomic runs the claim, the handler and the completion in one
// transaction, so the transaction itself is the lock: a duplicate waits for
// the first request and replays its response, and a crash leaves nothing
// behind. Choose it when the handler only writes to the store's database.
// With Config.DeferClaim an atomic-mode claim moves to the completion: one
// insert records the key and its response with the COMMIT, and the key's
// unique index still lets exactly one of two duplicates commit.
//
// Errors the middleware answers itself are RFC 9457 problem responses,
// listed in docs/problems.md.
package idem
