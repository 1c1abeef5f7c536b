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
	OutcomeInvalidBody Outcome = "invalid_body" // 400 or 413: the request (its body, or its target) cannot be fingerprinted
	OutcomeNoScope     Outcome = "no_scope"     // 401: the request has no user
	OutcomeStoreError  Outcome = "store_error"  // 503: the store failed; the handler did not run or was rolled back
	OutcomeLeaseLost   Outcome = "lease_lost"   // the key passed to another attempt, or the lease lapsed or ran past its maximum life; the handler's work was rolled back
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
	// Reacquired: the request took over a FAILED, lease-expired or expired record.
	Reacquired bool
	// Renewals counts the lease renewals while the handler ran.
	Renewals int
	// Err is the store error behind OutcomeStoreError, or what went wrong
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
