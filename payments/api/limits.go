package api

import (
	"time"

	"github.com/idem-dev/idem/limits"
)

// Defaults of Limits.
const (
	DefaultBodyTimeout     = limits.DefaultBodyTimeout
	DefaultBodyMemory      = limits.DefaultBodyMemory
	DefaultRequestsPerUser = limits.DefaultRequestsPerScope
)

// Limits bound what the requests that move money may hold of the server,
// so that slow or large uploads cannot exhaust its memory: a refused
// request is answered at once and stores nothing. Its zero value is the
// defaults.
type Limits struct {
	// BodyTimeout is how long a request body may take to arrive once the
	// request has been authenticated; a body still arriving after it gets
	// 408 body-timeout. Default DefaultBodyTimeout (10 s).
	BodyTimeout time.Duration
	// BodyMemory bounds the bytes of all request bodies in flight together:
	// a request reserves its Content-Length (the idempotency middleware's
	// body limit when it sends none) before its body is read, and one that
	// would pass the bound gets 503 overloaded with Retry-After. A body is
	// held up to three times while it is handled (as read, as fingerprinted,
	// as decoded), so the memory bounded is about three times this.
	// Default DefaultBodyMemory (32 MiB).
	BodyMemory int64
	// RequestsPerUser bounds one user's requests in flight on the routes
	// that move money; past it, 429 too-many-requests with Retry-After.
	// Default DefaultRequestsPerUser (16).
	RequestsPerUser int
}

// Bounds holds what the requests in flight hold of Limits: the bodies'
// bytes and each user's requests. One Bounds shared by every door (HTTP,
// gRPC) bounds a user whichever door they come by.
type Bounds = limits.Limiter

// NewBounds returns the Bounds of l (its zero fields the defaults).
func NewBounds(l Limits) (*Bounds, error) {
	return limits.New(limits.Config{BodyTimeout: l.BodyTimeout, BodyMemory: l.BodyMemory, RequestsPerScope: l.RequestsPerUser})
}
