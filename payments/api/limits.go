package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-dev/idem"
)

// Defaults of Limits.
const (
	DefaultBodyTimeout     = 10 * time.Second
	DefaultBodyMemory      = 32 << 20
	DefaultRequestsPerUser = 16
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

func (l Limits) withDefaults() (Limits, error) {
	if l.BodyTimeout < 0 || l.BodyMemory < 0 || l.RequestsPerUser < 0 {
		return l, fmt.Errorf("api: Limits has a negative bound: %+v", l)
	}
	if l.BodyTimeout == 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.BodyMemory == 0 {
		l.BodyMemory = DefaultBodyMemory
	}
	if l.RequestsPerUser == 0 {
		l.RequestsPerUser = DefaultRequestsPerUser
	}
	return l, nil
}

// limiter enforces Limits in front of the idempotency middleware: it reads
// the body itself, within the deadline and the memory bound, and hands the
// middleware the bytes.
type limiter struct {
	limits    Limits
	maxBody   int64        // the middleware's body limit: a larger body is its 413
	keyHeader string       // the middleware's key header, named in the 408
	held      atomic.Int64 // body bytes reserved by requests in flight
	mu        sync.Mutex   // guards perUser
	perUser   map[string]int
}

func newLimiter(l Limits, cfg idem.Config) *limiter {
	maxBody := cfg.MaxRequestBytes
	if maxBody <= 0 { // a Config not built by idem.New: its default
		maxBody = idem.DefaultMaxRequestBytes
	}
	return &limiter{limits: l, maxBody: maxBody, keyHeader: cfg.Header, perUser: map[string]int{}}
}

// wrap bounds next, a route that moves money, behind authentication.
func (l *limiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := userOf(r)
		if !l.enter(user) {
			retryLater(w, ProblemTooManyRequests, http.StatusTooManyRequests,
				fmt.Sprintf("You have %d requests in flight, the most allowed; nothing was stored. Retry after Retry-After seconds.", l.limits.RequestsPerUser))
			return
		}
		defer l.leave(user)

		// One byte past the middleware's limit, so that it still sees a
		// body too large and answers 413.
		size := l.maxBody + 1
		if r.ContentLength >= 0 && r.ContentLength < size {
			size = r.ContentLength
		}
		if l.held.Add(size) > l.limits.BodyMemory {
			l.held.Add(-size)
			retryLater(w, ProblemOverloaded, http.StatusServiceUnavailable,
				"The server is receiving too many request bodies at once; nothing was stored. Retry after Retry-After seconds.")
			return
		}
		defer l.held.Add(-size)

		body, err := l.read(w, r, size)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeProblem(w, ProblemBodyTimeout, http.StatusRequestTimeout,
				fmt.Sprintf("The request body did not arrive within %v; nothing was stored. Send it again, with the same %s.",
					l.limits.BodyTimeout, l.keyHeader))
			return
		case err != nil:
			// The client went away, or sent a malformed chunk: nobody
			// reads the answer, and the middleware never saw the request.
			w.Header().Set("Connection", "close")
			writeProblem(w, ProblemBodyInvalid, http.StatusBadRequest, "The request body could not be read; nothing was stored.")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// read reads at most size bytes of the body before the body deadline.
func (l *limiter) read(w http.ResponseWriter, r *http.Request, size int64) ([]byte, error) {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(l.limits.BodyTimeout)); err != nil {
		return nil, fmt.Errorf("set body deadline: %w", err)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, size))
	if err != nil {
		return nil, err
	}
	// The rest of the request's time is the server's own timeouts'.
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear body deadline: %w", err)
	}
	return buf.Bytes(), nil
}

func (l *limiter) enter(user string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perUser[user] >= l.limits.RequestsPerUser {
		return false
	}
	l.perUser[user]++
	return true
}

func (l *limiter) leave(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perUser[user]--; l.perUser[user] == 0 {
		delete(l.perUser, user)
	}
}

// retryAfter is the Retry-After of a request refused for a bound: the
// bounds are of requests in flight, which end within seconds.
const retryAfter = 1

// retryLater answers a request refused for a bound, with Retry-After.
func retryLater(w http.ResponseWriter, t ProblemType, status int, detail string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeProblem(w, t, status, detail)
}
