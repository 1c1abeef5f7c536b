package idem

import "time"

// Outcome is how the middleware answered a request that carried a key.
type Outcome string

// The outcomes an Event reports.
const (
	OutcomeExecuted    Outcome = "executed"     // the handler ran and its final response was stored
	OutcomeFailed      Outcome = "failed"       // the handler ran; its response (5xx, 408, 429) was not stored, the key is retriable
	OutcomeReplayed    Outcome = "replayed"     // a stored response was replayed
	OutcomeInFlight    Outcome = "in_flight"    // 409: another request holds the key
	OutcomeMismatch    Outcome = "mismatch"     // 422: the key was used for another request
	OutcomeInvalidKey  Outcome = "invalid_key"  // 400: missing or malformed key
	OutcomeInvalidBody Outcome = "invalid_body" // 400 or 413: the body cannot be fingerprinted
	OutcomeNoScope     Outcome = "no_scope"     // 401: the request has no user
	OutcomeStoreError  Outcome = "store_error"  // 503: the store failed; the handler did not run or was rolled back
	OutcomeLockLost    Outcome = "lock_lost"    // the lease was lost to another attempt; the handler's work was rolled back
	OutcomeAbandoned   Outcome = "abandoned"    // the client left or the handler panicked; the work was rolled back
)

// Event describes one request that carried a key. It never holds a request
// or response body.
type Event struct {
	Mode       Mode
	Scope      string
	Key        string
	Method     string
	Path       string
	Outcome    Outcome
	StatusCode int
	Duration   time.Duration
	// Reacquired: the request took over a FAILED or lock-expired record.
	Reacquired bool
	// Renewals counts the lease renewals while the handler ran.
	Renewals int
	// Err is the store error behind OutcomeStoreError, or what went wrong
	// behind OutcomeAbandoned and OutcomeLockLost. It names no body.
	Err error
}
