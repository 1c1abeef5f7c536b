package idem

import (
	"github.com/idem-dev/idem/store"
)

// result is what a request gets, decided before anything is written: the
// request path returns one, and the door sends it (Middleware.serve, Do)
// as response (respond.go) renders it.
type result struct {
	outcome Outcome
	// captured is the handler's response (OutcomeExecuted, OutcomeFailed),
	// and stored what the record keeps of it (OutcomeExecuted).
	captured *capture
	stored   *store.Response
	// replayed is the stored response a retry gets (OutcomeReplayed).
	replayed *store.Response
	// first is the fingerprint the key was first used with (OutcomeKeyReused).
	first store.Fingerprint
	// problem answers a request the middleware refused itself.
	problem ProblemType
	status  int
	detail  string
	// err is what went wrong, for the Event (never a body).
	err error
}

func rejected(o Outcome, t ProblemType, status int, detail string) result {
	return result{outcome: o, problem: t, status: status, detail: detail}
}

func storeFailed(err error) result {
	return result{outcome: OutcomeStoreUnavailable, err: err}
}

func inFlight() result { return result{outcome: OutcomeInFlight} }

func leaseLost(err error) result { return result{outcome: OutcomeLeaseLost, err: err} }
