package idemgrpc_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
		http.StatusConflict:              codes.AlreadyExists, // a final 409; the middleware's own (in-flight, lease-lost) are Aborted
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
// stored and replayed with its message; a retriable one frees the key,
// and the retry runs the handler again.
func TestHandlerCodes(t *testing.T) {
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
}

// A handler's ResponseError is stored or its key freed by its HTTP status, never
// by its code: a 409 is final and replays, as over HTTP, with or without
// Retry-After; 408, 429 and 503 free the key.
func TestResponseErrorFinality(t *testing.T) {
	t.Parallel()
	st := newBackend(t).store
	for _, row := range []struct {
		status     int
		retryAfter string
		code       codes.Code
		stored     bool
	}{
		{http.StatusConflict, "", codes.AlreadyExists, true},
		{http.StatusConflict, "1", codes.AlreadyExists, true}, // a handler's 409 is final over HTTP too
		{http.StatusPaymentRequired, "", codes.FailedPrecondition, true},
		{http.StatusBadRequest, "", codes.InvalidArgument, true},
		{http.StatusTooManyRequests, "1", codes.ResourceExhausted, false},
		{http.StatusRequestTimeout, "", codes.DeadlineExceeded, false},
		{http.StatusServiceUnavailable, "1", codes.Unavailable, false},
	} {
		r := idem.Response{StatusCode: row.status, Header: http.Header{}}
		if row.retryAfter != "" {
			r.Header.Set("Retry-After", row.retryAfter)
		}
		s := newServer(t, st, idem.Config{}, func(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
			return nil, idemgrpc.ResponseError(r, "some-problem", "refused")
		})
		key := uuid.NewString()
		first := s.unary(t, "alice", key, payload("pay"))
		again := s.unary(t, "alice", key, payload("pay"))
		require.Equal(t, row.code, status.Code(first.err), "%d: %v", row.status, first.err)
		requireReason(t, first.err, "some-problem", strconv.Itoa(row.status))
		require.Equal(t, row.stored, again.replayed(t), "%d: stored", row.status)
		if row.stored {
			require.True(t, proto.Equal(status.Convert(first.err).Proto(), status.Convert(again.err).Proto()), "%v != %v", first.err, again.err)
		}
		runs := int32(2)
		if row.stored {
			runs = 1
		}
		require.Equal(t, runs, s.svc.runs.Load(), "%d: handler runs", row.status)
	}
}
