package idem

import "strconv"

// ProblemType names a kind of problem response. The full type URI is
// Config.ProblemTypeBase followed by the name; docs/problems.md documents
// each one.
type ProblemType string

// The problem types the middleware answers with.
const (
	ProblemKeyMissing       ProblemType = "key-missing"        // 400: the route requires a key and none was sent
	ProblemKeyInvalid       ProblemType = "key-invalid"        // 400: the key header is malformed
	ProblemBodyInvalid      ProblemType = "body-invalid"       // 400: a JSON body cannot be canonicalised, or the body cannot be read
	ProblemTargetInvalid    ProblemType = "target-invalid"     // 400: the path or query holds bytes that are not UTF-8
	ProblemBodyTooLarge     ProblemType = "body-too-large"     // 413: the body exceeds Config.MaxRequestBytes
	ProblemScopeMissing     ProblemType = "scope-missing"      // 401: the request has no scope (no authenticated user)
	ProblemKeyReused        ProblemType = "key-reused"         // 422: the key was first used for a different request
	ProblemInFlight         ProblemType = "in-flight"          // 409 with Retry-After: another request with the key is running
	ProblemLeaseLost        ProblemType = "lease-lost"         // 409 with Retry-After: the key passed to a retry; this attempt was rolled back
	ProblemStoreUnavailable ProblemType = "store-unavailable"  // 503: the key store failed; nothing ran, or it was rolled back
	ProblemResponseTooLarge ProblemType = "response-too-large" // stored: the response exceeded Config.MaxResponseBytes; 500 when the request took effect, the handler's 4xx when it was refused
)

// HeaderShouldRetry is the response header that tells a client, without
// reading the body, whether a retry with the same key may get another
// answer: "true" (after Retry-After when the answer has one) or "false"
// (the answer is final: change the request, or look its result up). The
// middleware sets it on every problem it answers, package limits on its
// refusals, and it is replayed with a stored answer (see
// [Config.ReplayHeaders]); docs/problems.md lists each problem's value.
const HeaderShouldRetry = "Idempotent-Should-Retry"

// ShouldRetry reports whether an answer with this HTTP status asks for a
// retry with the same key: 5xx, 408 and 429. It is the rule every door
// decides an answer's finality by; the middleware's own in-flight and
// lease-lost 409s ask for a retry too, and its response-too-large does not.
func ShouldRetry(status int) bool { return !isFinal(status) }

// ShouldRetryHeader is the HeaderShouldRetry value of an answer with this
// HTTP status: "true" when ShouldRetry, else "false".
func ShouldRetryHeader(status int) string { return strconv.FormatBool(ShouldRetry(status)) }

// shouldRetry is the HeaderShouldRetry value of a problem of type t
// answered with status.
func (t ProblemType) shouldRetry(status int) bool {
	switch t {
	case ProblemInFlight, ProblemLeaseLost:
		return true
	case ProblemResponseTooLarge:
		return false // stored: every retry gets this answer
	}
	return ShouldRetry(status)
}

// Problem is a response the middleware answers itself, as
// Config.ProblemFunc gets it to render.
type Problem struct {
	Type   ProblemType // what went wrong: ProblemKeyMissing, …
	URI    string      // Config.ProblemTypeBase followed by Type
	Title  string      // a short, fixed summary of Type
	Status int         // the HTTP status to answer with
	Detail string      // what happened to this request; it names no body
}

var problemTitles = map[ProblemType]string{
	ProblemKeyMissing:       "Idempotency key missing",
	ProblemKeyInvalid:       "Idempotency key invalid",
	ProblemBodyInvalid:      "Request body invalid",
	ProblemTargetInvalid:    "Request target invalid",
	ProblemBodyTooLarge:     "Request body too large",
	ProblemScopeMissing:     "Unauthenticated",
	ProblemKeyReused:        "Idempotency key reused",
	ProblemInFlight:         "Request in flight",
	ProblemLeaseLost:        "Idempotency key lost to a retry",
	ProblemStoreUnavailable: "Idempotency store unavailable",
	ProblemResponseTooLarge: "Response too large to store",
}
