package idem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ProblemType names a kind of problem response. The full type URI is
// Config.ProblemTypeBase followed by the name; docs/problems.md documents
// each one.
type ProblemType string

// The problem types the middleware answers with.
const (
	ProblemKeyMissing       ProblemType = "key-missing"        // 400: the route requires a key and none was sent
	ProblemKeyInvalid       ProblemType = "key-invalid"        // 400: the key header is malformed
	ProblemBodyInvalid      ProblemType = "body-invalid"       // 400: a JSON body cannot be canonicalised, or the body cannot be read
	ProblemBodyTooLarge     ProblemType = "body-too-large"     // 413: the body exceeds Config.MaxRequestBytes
	ProblemScopeMissing     ProblemType = "scope-missing"      // 401: the request has no authenticated user
	ProblemKeyReused        ProblemType = "key-reused"         // 422: the key was first used for a different request
	ProblemInFlight         ProblemType = "in-flight"          // 409 with Retry-After: another request with the key is running
	ProblemLockLost         ProblemType = "lock-lost"          // 409 with Retry-After: the lease passed to a retry; this attempt was rolled back
	ProblemStoreUnavailable ProblemType = "store-unavailable"  // 503: the key store failed; nothing ran, or it was rolled back
	ProblemResponseTooLarge ProblemType = "response-too-large" // 500, stored: the request took effect but its response exceeded Config.MaxResponseBytes
)

var problemTitles = map[ProblemType]string{
	ProblemKeyMissing:       "Idempotency key missing",
	ProblemKeyInvalid:       "Idempotency key invalid",
	ProblemBodyInvalid:      "Request body invalid",
	ProblemBodyTooLarge:     "Request body too large",
	ProblemScopeMissing:     "Unauthenticated",
	ProblemKeyReused:        "Idempotency key reused",
	ProblemInFlight:         "Request in flight",
	ProblemLockLost:         "Idempotency lock lost",
	ProblemStoreUnavailable: "Idempotency store unavailable",
	ProblemResponseTooLarge: "Response too large to store",
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// problemBody renders a problem details body.
func (m *Middleware) problemBody(t ProblemType, status int, detail string) []byte {
	b, err := json.Marshal(problem{Type: m.cfg.ProblemTypeBase + string(t), Title: problemTitles[t], Status: status, Detail: detail})
	if err != nil {
		panic("idem: marshal problem: " + err.Error()) // a struct of strings and an int always marshals
	}
	return append(b, '\n')
}

// writeProblem sends a problem response. A 409 that the client should
// retry carries Retry-After.
func (m *Middleware) writeProblem(w http.ResponseWriter, t ProblemType, status int, detail string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if t == ProblemInFlight || t == ProblemLockLost {
		h.Set("Retry-After", strconv.Itoa(m.retryAfterSeconds()))
	}
	w.WriteHeader(status)
	_, _ = w.Write(m.problemBody(t, status, detail))
}

func (m *Middleware) retryAfterSeconds() int {
	s := int((m.cfg.RetryAfter + 999_999_999) / 1_000_000_000)
	return max(s, 1)
}
