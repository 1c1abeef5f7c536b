package idemgrpc_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemgrpc"
	"github.com/idem-dev/idem/internal/require"
)

// codeTable is codes.go's table, written out again: each handler code, its
// HTTP status, and whether its answer is stored.
var codeTable = []struct {
	code   codes.Code
	http   int
	stored bool
}{
	{codes.OK, http.StatusOK, true},
	{codes.InvalidArgument, http.StatusBadRequest, true},
	{codes.FailedPrecondition, http.StatusUnprocessableEntity, true},
	{codes.OutOfRange, http.StatusBadRequest, true},
	{codes.Unauthenticated, http.StatusUnauthorized, true},
	{codes.PermissionDenied, http.StatusForbidden, true},
	{codes.NotFound, http.StatusNotFound, true},
	{codes.AlreadyExists, http.StatusConflict, true},
	{codes.Aborted, http.StatusServiceUnavailable, false},
	{codes.ResourceExhausted, http.StatusTooManyRequests, false},
	{codes.Canceled, http.StatusServiceUnavailable, false},
	{codes.Unknown, http.StatusInternalServerError, false},
	{codes.Internal, http.StatusInternalServerError, false},
	{codes.DataLoss, http.StatusInternalServerError, false},
	{codes.Unimplemented, http.StatusNotImplemented, false},
	{codes.Unavailable, http.StatusServiceUnavailable, false},
	{codes.DeadlineExceeded, http.StatusGatewayTimeout, false},
	{codes.Code(99), http.StatusInternalServerError, false}, // a code no table knows
}

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	for _, row := range codeTable {
		require.Equal(t, row.http, idemgrpc.HTTPStatus(row.code), row.code)
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]codes.Code{
		http.StatusOK:                    codes.OK,
		http.StatusCreated:               codes.OK,
		http.StatusAccepted:              codes.OK,
		http.StatusNoContent:             codes.OK,
		http.StatusBadRequest:            codes.InvalidArgument, // key-missing, key-invalid
		http.StatusRequestEntityTooLarge: codes.InvalidArgument,
		http.StatusUnsupportedMediaType:  codes.InvalidArgument,
		http.StatusUnauthorized:          codes.Unauthenticated, // scope-missing
		http.StatusPaymentRequired:       codes.FailedPrecondition,
		http.StatusUnprocessableEntity:   codes.FailedPrecondition, // key-reused
		http.StatusPreconditionFailed:    codes.FailedPrecondition,
		http.StatusForbidden:             codes.PermissionDenied,
		http.StatusNotFound:              codes.NotFound,
		http.StatusConflict:              codes.Aborted, // in-flight, lease-lost
		http.StatusTooManyRequests:       codes.ResourceExhausted,
		http.StatusNotImplemented:        codes.Unimplemented,
		http.StatusServiceUnavailable:    codes.Unavailable, // store-unavailable
		http.StatusGatewayTimeout:        codes.DeadlineExceeded,
		http.StatusRequestTimeout:        codes.DeadlineExceeded,
		http.StatusInternalServerError:   codes.Internal,
		http.StatusTeapot:                codes.Internal,
	} {
		require.Equal(t, want, idemgrpc.Code(status), status)
	}
}

// Every row of the table over a real call: a handler's final code is
// stored and replayed with its message; a retriable one releases the key,
// and the retry runs the handler again.
func TestHandlerCodes(t *testing.T) {
	t.Parallel()
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, newBackend(t).store, idem.Config{}, nil)
			for _, row := range codeTable {
				key := uuid.NewString()
				req := failWith(row.code, "answered "+row.code.String())
				if row.code == codes.OK {
					req = payload("answered OK")
				}
				before := s.svc.runs.Load()
				first := s.unary(t, "alice", key, req)
				again := s.unary(t, "alice", key, req)
				require.Equal(t, row.code, status.Code(first.err), "%v", first.err)
				require.Equal(t, row.code, status.Code(again.err), "%v", again.err)
				require.Equal(t, status.Convert(first.err).Message(), status.Convert(again.err).Message(), row.code)
				require.False(t, first.replayed(t), row.code)
				require.Equal(t, row.stored, again.replayed(t), "%v: stored", row.code)
				runs := int32(2)
				if row.stored {
					runs = 1
				}
				require.Equal(t, before+runs, s.svc.runs.Load(), "%v: handler runs", row.code)
			}
		})
	}
}
