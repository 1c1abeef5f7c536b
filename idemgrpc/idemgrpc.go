// Package idemgrpc makes unary gRPC calls take effect once per key: a
// server interceptor on [idem.Middleware.Do], with the same store, state
// machine and promise as the HTTP middleware (docs/grpc.md).
//
// The key is the `idempotency-key` metadata; the fingerprint covers the
// full method name and the request message's deterministic serialization.
// A retry gets the first response message, byte for byte, with the header
// `idempotent-replayed: true`; a handler's final error is stored and
// replayed too: final by the HTTP status ResponseError gave it, or else by its
// code's (HTTPStatus). Every error of the interceptor's own carries a
// google.rpc.ErrorInfo naming its problem type. Handlers reach the call's
// transaction as HTTP handlers do (pgstore.DB(ctx)) and its key with
// idem.KeyFromContext.
package idemgrpc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// Metadata the interceptor reads and sets.
const (
	MetadataKey      = "idempotency-key"
	MetadataReplayed = "idempotent-replayed"
)

// Content types of a stored reply: a response message, or a status.
const (
	contentMessage = "application/grpc+proto"
	contentStatus  = "application/grpc-status+proto"
)

// Config configures the interceptor. Its zero value is valid.
type Config struct {
	// ScopeFunc says whose call it is; every key is scoped by it. An
	// empty scope is answered Unauthenticated and nothing is stored.
	// Default: the scope an authentication interceptor put in the context
	// with idem.WithScope.
	ScopeFunc func(ctx context.Context) string
	// MethodFunc says whether a method needs a key; the others pass
	// straight through. Default: every unary method.
	MethodFunc func(fullMethod string) bool
}

// UnaryServerInterceptor returns the interceptor: install it after the
// authentication interceptor.
func UnaryServerInterceptor(mw *idem.Middleware, cfg Config) grpc.UnaryServerInterceptor {
	if cfg.ScopeFunc == nil {
		cfg.ScopeFunc = idem.ScopeFromContext
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if cfg.MethodFunc != nil && !cfg.MethodFunc(info.FullMethod) {
			return handler(ctx, req)
		}
		msg, ok := req.(proto.Message)
		if !ok {
			return nil, internalError(info.FullMethod + ": the request is not a protocol buffer message")
		}
		fp, err := fingerprint(info.FullMethod, msg)
		if err != nil {
			return nil, ResponseError(idem.Response{StatusCode: http.StatusBadRequest}, string(idem.ProblemBodyInvalid), fmt.Sprintf("idemgrpc: serialize the request: %v", err))
		}
		md, _ := metadata.FromIncomingContext(ctx)
		call := idem.Call{
			Scope: cfg.ScopeFunc(ctx), Key: strings.Join(md.Get(MetadataKey), ","), Fingerprint: fp,
			Method: info.FullMethod, Route: info.FullMethod,
		}
		var resp any // the handler's own response, when it ran and this call answers with it
		res := mw.Do(ctx, call, func(ctx context.Context) idem.Response {
			r, err := handler(ctx, req)
			resp = r
			return Response(r, err)
		})
		if res.Replayed {
			if err := grpc.SetHeader(ctx, metadata.Pairs(MetadataReplayed, "true")); err != nil {
				return nil, internalError(fmt.Sprintf("set header: %v", err))
			}
		}
		if res.Outcome == idem.OutcomeInvalidKey && len(md.Get(MetadataKey)) == 0 {
			// Do takes no key for an empty one.
			res.Problem = idem.ProblemKeyMissing
		}
		return answer(info.FullMethod, mw.Config().ProblemTypeBase, res, resp)
	}
}

// fingerprint is SHA-256 over length-prefixed fields: a version tag, the
// full method, and the request's deterministic serialization.
func fingerprint(fullMethod string, req proto.Message) (store.Fingerprint, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return store.Fingerprint{}, err
	}
	h := sha256.New()
	for _, field := range [][]byte{[]byte("idem-grpc-v1"), []byte(fullMethod), b} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write(field)
	}
	return store.Fingerprint{Version: idem.FingerprintVersion, Method: "RPC", Path: fullMethod, Hash: h.Sum(nil)}, nil
}

// Response is a handler's answer as the interceptor stores it, in HTTP's
// terms, which decide whether it is stored: a response message is 200; an
// error is its status, with the HTTP status ResponseError gave it, or else
// its code's (HTTPStatus). A completer (package completer) that finishes a
// call begun over gRPC answers with it, so that the call's retry replays.
func Response(resp any, err error) idem.Response {
	if err == nil {
		m, ok := resp.(proto.Message)
		if !ok {
			err = internalError("the response is not a protocol buffer message")
		} else if b, merr := (proto.MarshalOptions{Deterministic: true}).Marshal(m); merr != nil {
			err = internalError(fmt.Sprintf("serialize the response: %v", merr))
		} else {
			return idem.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentMessage}}, Body: b}
		}
	}
	s := status.Convert(err)
	code := HTTPStatus(s.Code())
	var re *responseError
	if errors.As(err, &re) {
		code = re.httpStatus
	}
	b, merr := proto.Marshal(s.Proto())
	if merr != nil {
		b = nil
	}
	return idem.Response{StatusCode: code, Header: http.Header{"Content-Type": {contentStatus}}, Body: b}
}

// answer turns Do's result into the call's response or error.
// problemBase is the middleware's Config.ProblemTypeBase.
func answer(fullMethod, problemBase string, res idem.Result, resp any) (any, error) {
	r := res.Response
	if r == nil {
		return nil, errorStatus(codes.Canceled, 0, string(res.Outcome), "idemgrpc: the call was abandoned; its work was rolled back", nil).Err()
	}
	switch r.Header.Get("Content-Type") {
	case contentMessage:
		if !res.Replayed && resp != nil {
			return resp, nil
		}
		out, err := newResponse(fullMethod)
		if err != nil {
			return nil, internalError(err.Error())
		}
		if err := proto.Unmarshal(r.Body, out); err != nil {
			return nil, internalError(fmt.Sprintf("the stored response does not decode: %v", err))
		}
		return out, nil
	case contentStatus:
		var s spb.Status
		if err := proto.Unmarshal(r.Body, &s); err != nil {
			return nil, internalError(fmt.Sprintf("the stored status does not decode: %v", err))
		}
		return nil, status.FromProto(&s).Err()
	}
	// An answer of the middleware's own: a problem response, whose type
	// the middleware names, or its body when replayed.
	p := problemOf(r.Body)
	reason, detail := string(res.Problem), p.Detail
	if reason == "" {
		reason = strings.TrimPrefix(p.Type, problemBase)
	}
	switch {
	case res.Problem == idem.ProblemKeyMissing:
		detail = "This call must carry one " + MetadataKey + " metadata value."
	case detail == "":
		detail = p.Title
	}
	code := Code(r.StatusCode)
	if res.Problem == idem.ProblemInFlight || res.Problem == idem.ProblemLeaseLost {
		code = codes.Aborted // a 409 for now: retry after RetryInfo's delay
	}
	return nil, responseErrorCode(*r, code, reason, detail)
}

// newResponse is an empty response message of fullMethod
// ("/package.Service/Method"), from the registry generated code fills.
func newResponse(fullMethod string) (proto.Message, error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("malformed method %q", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, fmt.Errorf("response type of %s: %w", fullMethod, err)
	}
	return mt.New().Interface(), nil
}

// problem is what the interceptor reads of an RFC 9457 problem body.
type problem struct{ Type, Title, Detail string }

// problemOf reads a problem body; one rendered by Config.ProblemFunc in
// another form reads as a refusal with no more said.
func problemOf(body []byte) problem {
	var p problem
	if err := json.Unmarshal(body, &p); err != nil || (p.Detail == "" && p.Title == "") {
		p.Title = "The idempotency layer refused the call."
	}
	return p
}
