package api

import (
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/limits"
)

// ProblemType names a kind of problem response of the API. The type URI is
// idem.DefaultProblemTypeBase followed by the name, like the middleware's
// own; docs/paymentsd.md documents each one.
type ProblemType string

// The problem types of the API.
const (
	ProblemUnauthorized         ProblemType = "unauthorized"                // 401: no API key, or an unknown one
	ProblemInvalidRequest       ProblemType = "invalid-request"             // 400, stored: the body is not a valid request
	ProblemUnsupportedMediaType ProblemType = "unsupported-media-type"      // 415: the body is not declared as JSON
	ProblemInsufficientFunds    ProblemType = "insufficient-funds"          // 402, stored: the source balance is too small
	ProblemBalanceLimit         ProblemType = "balance-limit"               // 400, stored: a credit would pass the balance limit
	ProblemDuplicate            ProblemType = "duplicate-transaction"       // 409, stored, no Retry-After: a net on the business tables fired
	ProblemDuplicateDeposit     ProblemType = "duplicate-deposit"           // 409, stored, no Retry-After: the deposits' minute net fired
	ProblemNotFound             ProblemType = "not-found"                   // 404
	ProblemMethodNotAllowed     ProblemType = "method-not-allowed"          // 405
	ProblemInternal             ProblemType = "internal-error"              // 500, not stored: retry with the same key
	ProblemUnavailable          ProblemType = "unavailable"                 // 503: the database does not answer
	ProblemPayoutsUnavailable   ProblemType = "payouts-unavailable"         // 503, not stored: no bank configured (--bank-url)
	ProblemBodyTimeout          ProblemType = limits.ProblemBodyTimeout     // 408: the body did not arrive within Limits.BodyTimeout
	ProblemOverloaded           ProblemType = limits.ProblemOverloaded      // 503 with Retry-After: the bodies in flight are at Limits.BodyMemory
	ProblemTooManyRequests      ProblemType = limits.ProblemTooManyRequests // 429 with Retry-After: the user is at Limits.RequestsPerUser
	// ProblemBodyInvalid is the idem middleware's type, for a body that
	// could not be read before it reached the middleware.
	ProblemBodyInvalid = ProblemType(idem.ProblemBodyInvalid)
)

var problemTitles = map[ProblemType]string{
	ProblemUnauthorized:         "Unauthorized",
	ProblemInvalidRequest:       "Invalid request",
	ProblemUnsupportedMediaType: "Unsupported media type",
	ProblemInsufficientFunds:    "Insufficient funds",
	ProblemBalanceLimit:         "Balance limit exceeded",
	ProblemDuplicate:            "Duplicate transaction",
	ProblemDuplicateDeposit:     "Duplicate deposit",
	ProblemNotFound:             "Not found",
	ProblemMethodNotAllowed:     "Method not allowed",
	ProblemInternal:             "Internal error",
	ProblemUnavailable:          "Service unavailable",
	ProblemPayoutsUnavailable:   "Payouts unavailable",
	ProblemBodyTimeout:          "Request body timeout",
	ProblemOverloaded:           "Overloaded",
	ProblemTooManyRequests:      "Too many requests",
	ProblemBodyInvalid:          "Request body invalid",
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists what is wrong with each member of an invalid request.
	Errors []ProblemField `json:"errors,omitempty"`
}

// ProblemField is one member's problem; Pointer is a JSON Pointer into the
// request body as a URI fragment ("#/amount"), "#" for the body itself.
type ProblemField struct {
	Pointer string `json:"pointer"`
	Detail  string `json:"detail"`
}

// TypeURI returns the full type URI of a problem type.
func TypeURI(t ProblemType) string { return idem.DefaultProblemTypeBase + string(t) }

// writeProblem sends a problem response, without Retry-After: only the
// bounds of Limits ask for a retry later (package limits). Its
// idem.HeaderShouldRetry says whether a retry may get another answer.
func writeProblem(w http.ResponseWriter, t ProblemType, status int, detail string, fields ...ProblemField) {
	w.Header().Set(idem.HeaderShouldRetry, idem.ShouldRetryHeader(status))
	write(w, status, "application/problem+json",
		Problem{Type: TypeURI(t), Title: problemTitles[t], Status: status, Detail: detail, Errors: fields})
}
