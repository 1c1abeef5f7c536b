package idem

import "time"

// Outcome is how the middleware answered a request that carried a key.
type Outcome string

// The outcomes an Event reports. An outcome the middleware answers with a
// problem of its own has that problem type's name, in snake case
// (OutcomeKeyReused is "key_reused", ProblemKeyReused "key-reused");
// OutcomeInvalidKey and OutcomeInvalidBody each stand for several.
const (
	OutcomeExecuted         Outcome = "executed"          // the handler ran and its final response was stored
	OutcomeFailed           Outcome = "failed"            // the handler ran; its response (5xx, 408, 429) was not stored, the key is retriable
	OutcomeReplayed         Outcome = "replayed"          // a stored response was replayed
	OutcomeInFlight         Outcome = "in_flight"         // 409 in-flight: another request holds the key
	OutcomeKeyReused        Outcome = "key_reused"        // 422 key-reused: the key was first used for a different request
	OutcomeInvalidKey       Outcome = "invalid_key"       // 400 key-missing or key-invalid: missing or malformed key
	OutcomeInvalidBody      Outcome = "invalid_body"      // 400 body-invalid or target-invalid, 413 body-too-large: the request cannot be fingerprinted
	OutcomeScopeMissing     Outcome = "scope_missing"     // 401 scope-missing: the request has no scope (no authenticated user)
	OutcomeStoreUnavailable Outcome = "store_unavailable" // 503 store-unavailable: the store failed; the handler did not run or was rolled back
	OutcomeLeaseLost        Outcome = "lease_lost"        // 409 lease-lost: the key passed to another attempt, or the lease lapsed or ran past its maximum life; the handler's work was rolled back
	OutcomeAbandoned        Outcome = "abandoned"         // the client left or the handler panicked; the work was rolled back
)

// The outcomes' names before they took their problem types' names; the
// values are the new ones ("key_reused", "scope_missing",
// "store_unavailable"), so a dashboard that matched "mismatch", "no_scope"
// or "store_error" must match the new value.
const (
	// Deprecated: use OutcomeKeyReused.
	OutcomeMismatch = OutcomeKeyReused
	// Deprecated: use OutcomeScopeMissing.
	OutcomeNoScope = OutcomeScopeMissing
	// Deprecated: use OutcomeStoreUnavailable.
	OutcomeStoreError = OutcomeStoreUnavailable
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
	// Reacquired: the request took over a FAILED, lease-expired or expired record.
	Reacquired bool
	// Renewals counts the lease renewals while the handler ran.
	Renewals int
	// Err is the store error behind OutcomeStoreUnavailable, or what went wrong
	// behind OutcomeAbandoned and OutcomeLeaseLost. It names no body.
	Err error
	// Route is the pattern of the http.ServeMux route that matched
	// (http.Request.Pattern), such as "POST /v1/transactions", or "" when
	// the middleware runs outside one. Unlike Path it names no resource, so
	// it suits a metric label.
	Route string
}

// ObserveAll returns an ObserveFunc that passes each Event to every one of
// fns in turn, for metrics and logs at once:
//
//	cfg.ObserveFunc = idem.ObserveAll(m.Observe, idem.LogEvents(logger))
//
// Nil entries are skipped; with none left it returns nil.
func ObserveAll(fns ...func(Event)) func(Event) {
	var live []func(Event)
	for _, f := range fns {
		if f != nil {
			live = append(live, f)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(e Event) {
		for _, f := range live {
			f(e)
		}
	}
}
