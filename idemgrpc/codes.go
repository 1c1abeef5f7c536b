package idemgrpc

import (
	"net/http"

	"google.golang.org/grpc/codes"
)

// The table between gRPC codes and HTTP statuses for a handler's plain
// errors: a final answer (2xx, and 4xx but 408 and 429) is stored and
// replayed; a retriable one (5xx, 408, 429) frees the key. An error
// made by ResponseError carries its answer's own HTTP status, which decides
// instead of its code; every answer of the middleware's is one
// (docs/problems.md lists them all, with their reasons).
//
//	gRPC code            HTTP  stored
//	OK                   200   yes
//	InvalidArgument      400   yes
//	FailedPrecondition   422   yes
//	OutOfRange           400   yes
//	Unauthenticated      401   yes
//	PermissionDenied     403   yes
//	NotFound             404   yes
//	AlreadyExists        409   yes
//	Aborted              503*  no
//	ResourceExhausted    429   no
//	Canceled             503*  no
//	Unknown, Internal,
//	DataLoss             500   no
//	Unimplemented        501   no
//	Unavailable          503   no
//	DeadlineExceeded     504   no
//
// * A handler's Aborted and Canceled mean "try again", which a stored
// answer would forbid.
var toHTTP = map[codes.Code]int{
	codes.OK:                 http.StatusOK,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.FailedPrecondition: http.StatusUnprocessableEntity,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.Aborted:            http.StatusServiceUnavailable,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.Canceled:           http.StatusServiceUnavailable,
	codes.Unknown:            http.StatusInternalServerError,
	codes.Internal:           http.StatusInternalServerError,
	codes.DataLoss:           http.StatusInternalServerError,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
}

// HTTPStatus is the HTTP status of a handler's code, which decides whether
// its answer is stored (the table above).
func HTTPStatus(c codes.Code) int {
	if s, ok := toHTTP[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Code is the gRPC code of an HTTP status (the table above, read from the
// right; 402 and 412 are FailedPrecondition, 408 DeadlineExceeded).
// ResponseError makes a 409 with Retry-After Aborted.
func Code(status int) codes.Code {
	switch status {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNoContent:
		return codes.OK
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusPaymentRequired, http.StatusUnprocessableEntity, http.StatusPreconditionFailed:
		return codes.FailedPrecondition
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.AlreadyExists
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return codes.DeadlineExceeded
	}
	return codes.Internal
}
