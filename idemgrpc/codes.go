package idemgrpc

import (
	"net/http"

	"google.golang.org/grpc/codes"
)

// The one table between gRPC codes and HTTP statuses, whose terms decide
// what idem stores: a final answer (2xx, and 4xx but 408 and 429) is
// stored and replayed; a retriable one (5xx, 408, 429) releases the key.
//
//	gRPC code            HTTP  stored  middleware answers with it when
//	OK                   200   yes
//	InvalidArgument      400   yes     the key is missing or malformed (key-missing, key-invalid)
//	FailedPrecondition   422   yes     the key was used with another request (key-reused)
//	OutOfRange           400   yes
//	Unauthenticated      401   yes     the call has no user (scope-missing): nothing is stored
//	PermissionDenied     403   yes
//	NotFound             404   yes
//	AlreadyExists        409   yes
//	Aborted              409*  no      another call holds the key (in-flight, lease-lost): retry
//	ResourceExhausted    429   no
//	Canceled             499*  no      the call ended before its commit: rolled back
//	Unknown, Internal,
//	DataLoss             500   no
//	Unimplemented        501   no
//	Unavailable          503   no      the key store is unavailable (store-unavailable): retry
//	DeadlineExceeded     504   no
//
// * A handler's Aborted and Canceled are treated as 503, not stored: both
// mean "try again", which a stored 409 or 499 would forbid.
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
// right): for the middleware's own answers, and for a door that runs HTTP
// handlers behind gRPC.
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
		return codes.Aborted
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
