package idemgrpc

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idem-dev/idem"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the errors the
// interceptor answers with: the problem types of docs/problems.md.
const ErrorDomain = "github.com/idem-dev/idem"

// Keys of the google.rpc.ErrorInfo metadata the interceptor sets.
const (
	InfoHTTPStatus = "httpStatus" // the HTTP status of the answer, which decided whether it was stored
	InfoRetryAfter = "retryAfter" // seconds, as Retry-After: retry with the same key after it
	// InfoShouldRetry is "true" or "false", as HTTP's idem.HeaderShouldRetry:
	// whether a retry with the same key may get another answer.
	InfoShouldRetry = "shouldRetry"
)

// ResponseError is the gRPC error of a refusal in HTTP's terms (r's status is
// not 2xx), for a door that runs HTTP handlers behind gRPC: its code is
// Code's for r's status; its details are a google.rpc.ErrorInfo (reason,
// ErrorDomain, metadata InfoHTTPStatus, InfoShouldRetry (r's
// idem.HeaderShouldRetry, else idem.ShouldRetry of its status) and, with
// Retry-After, InfoRetryAfter) and, with Retry-After, a google.rpc.RetryInfo. Returned by
// a handler, it is stored when r's status is final (4xx but 408 and 429),
// as over HTTP, whatever its code.
func ResponseError(r idem.Response, reason, message string) error {
	return responseErrorCode(r, Code(r.StatusCode), reason, message)
}

func responseErrorCode(r idem.Response, code codes.Code, reason, message string) error {
	return &responseError{httpStatus: r.StatusCode, st: errorStatus(code, r.StatusCode, reason, message, r.Header)}
}

// responseError is a status whose answer's HTTP status is known.
type responseError struct {
	httpStatus int
	st         *status.Status
}

func (e *responseError) Error() string              { return e.st.Err().Error() }
func (e *responseError) GRPCStatus() *status.Status { return e.st }

// errorStatus is a status with a google.rpc.ErrorInfo and, when the
// answer's header h has a Retry-After of seconds, a google.rpc.RetryInfo.
func errorStatus(code codes.Code, httpStatus int, reason, message string, h http.Header) *status.Status {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: map[string]string{}}
	if httpStatus != 0 {
		info.Metadata[InfoHTTPStatus] = strconv.Itoa(httpStatus)
		info.Metadata[InfoShouldRetry] = idem.ShouldRetryHeader(httpStatus)
		if v := h.Get(idem.HeaderShouldRetry); v != "" {
			info.Metadata[InfoShouldRetry] = v
		}
	}
	retryAfter := h.Get("Retry-After")
	st := status.New(code, message)
	withInfo, err := st.WithDetails(info)
	if secs, aerr := strconv.Atoi(retryAfter); aerr == nil && secs >= 0 {
		info.Metadata[InfoRetryAfter] = retryAfter
		withInfo, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(secs) * time.Second)})
	}
	if err != nil {
		return st // only a code OK refuses details, and no error has it
	}
	return withInfo
}

// internalError is an error of the interceptor's own that no retry can
// mend: Internal, reason internal-error.
func internalError(message string) error {
	return errorStatus(codes.Internal, http.StatusInternalServerError, "internal-error", "idemgrpc: "+message, nil).Err()
}
