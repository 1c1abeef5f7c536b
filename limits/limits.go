// Package limits bounds what the requests in front of the idempotency
// middleware may hold of a server, so that slow or large uploads cannot
// exhaust its memory: a body deadline (408), a budget of body bytes in
// flight (503 with Retry-After) and a bound on each scope's requests in
// flight (429 with Retry-After). A refused request is answered at once and
// never reaches the middleware: nothing is stored.
//
// paymentsd's API and idem-gateway put every request that may take a key
// behind one [Limiter]; other doors take the same budget through
// [Limiter.Enter] and [Limiter.Reserve].
package limits

import (
	"bytes"
	"encoding/json"
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

// Defaults of Config.
const (
	DefaultBodyTimeout      = 10 * time.Second
	DefaultBodyMemory       = 32 << 20
	DefaultRequestsPerScope = 16
)

// The problem types a Limiter answers with; their URIs are
// idem.DefaultProblemTypeBase followed by the name.
const (
	ProblemBodyTimeout     = "body-timeout"      // 408: the body did not arrive within Config.BodyTimeout
	ProblemOverloaded      = "overloaded"        // 503 with Retry-After: the bodies in flight are at Config.BodyMemory
	ProblemTooManyRequests = "too-many-requests" // 429 with Retry-After: the scope is at Config.RequestsPerScope
	ProblemBodyInvalid     = string(idem.ProblemBodyInvalid)
)

// RetryAfter is the Retry-After, in seconds, of a request refused for a
// bound: the bounds are of requests in flight, which end within seconds.
const RetryAfter = 1

// Config is a Limiter's bounds. Its zero value is the defaults.
type Config struct {
	// BodyTimeout is how long a request body may take to arrive; a body
	// still arriving after it gets 408 body-timeout and the connection is
	// closed. Default DefaultBodyTimeout (10 s).
	BodyTimeout time.Duration
	// BodyMemory bounds the bytes of all request bodies in flight
	// together: a request reserves its Content-Length (MaxBody+1 when it
	// sends none) before its body is read, and one that would pass the
	// bound gets 503 overloaded. Default DefaultBodyMemory (32 MiB).
	BodyMemory int64
	// RequestsPerScope bounds one scope's (user's) requests in flight; past
	// it, 429 too-many-requests. Default DefaultRequestsPerScope (16).
	RequestsPerScope int
}

// Limiter enforces a Config. It is safe for concurrent use.
type Limiter struct {
	cfg     Config
	held    atomic.Int64 // body bytes reserved by requests in flight
	mu      sync.Mutex   // guards inScope
	inScope map[string]int
}

// New returns a Limiter; a negative bound is an error.
func New(cfg Config) (*Limiter, error) {
	if cfg.BodyTimeout < 0 || cfg.BodyMemory < 0 || cfg.RequestsPerScope < 0 {
		return nil, fmt.Errorf("limits: Config has a negative bound: %+v", cfg)
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.BodyMemory == 0 {
		cfg.BodyMemory = DefaultBodyMemory
	}
	if cfg.RequestsPerScope == 0 {
		cfg.RequestsPerScope = DefaultRequestsPerScope
	}
	return &Limiter{cfg: cfg, inScope: map[string]int{}}, nil
}

// Config returns the Limiter's bounds, defaults filled in.
func (l *Limiter) Config() Config { return l.cfg }

// MaxBody is the largest request body the middleware configured by mw
// takes: a larger one is its 413 (a gRPC message, grpc-go's
// ResourceExhausted).
func MaxBody(mw idem.Config) int64 {
	if mw.MaxRequestBytes <= 0 { // a Config not built by idem.New: its default
		return idem.DefaultMaxRequestBytes
	}
	return mw.MaxRequestBytes
}

// Wrap bounds next, the middleware configured by mw: the request's scope
// (idem.ScopeFromContext) and body are admitted (Admit), the body read
// within BodyTimeout, and next gets it as bytes already read.
func (l *Limiter) Wrap(next http.Handler, mw idem.Config) http.Handler {
	keyHeader := mw.Header
	if keyHeader == "" {
		keyHeader = idem.DefaultHeader
	}
	maxBody := MaxBody(mw)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One byte past the middleware's limit, so that it still sees a
		// body too large and answers 413.
		size := maxBody + 1
		if r.ContentLength >= 0 && r.ContentLength < size {
			size = r.ContentLength
		}
		done, refusal := l.Admit(idem.ScopeFromContext(r.Context()), size)
		if refusal != nil {
			for k, v := range refusal.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(refusal.StatusCode)
			_, _ = w.Write(refusal.Body)
			return
		}
		defer done()

		body, err := l.read(w, r, size)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeProblem(w, ProblemBodyTimeout, http.StatusRequestTimeout,
				fmt.Sprintf("The request body did not arrive within %v; nothing was stored. Send it again, with the same %s.",
					l.cfg.BodyTimeout, keyHeader))
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

// Admit admits one of scope's requests, reserving size bytes of body: done
// gives them back. A request past a bound is refused with the answer to
// send (429 too-many-requests or 503 overloaded, with Retry-After), and
// holds nothing. Every door of a server admits its requests at one Limiter,
// so that a scope is bounded whichever door it comes by.
func (l *Limiter) Admit(scope string, size int64) (done func(), refusal *idem.Response) {
	leave, ok := l.Enter(scope)
	if !ok {
		return nil, retryLater(ProblemTooManyRequests, http.StatusTooManyRequests,
			fmt.Sprintf("You have %d requests in flight, the most allowed; nothing was stored. Retry after Retry-After seconds.", l.cfg.RequestsPerScope))
	}
	release, ok := l.Reserve(size)
	if !ok {
		leave()
		return nil, retryLater(ProblemOverloaded, http.StatusServiceUnavailable,
			"The server is receiving too many request bodies at once; nothing was stored. Retry after Retry-After seconds.")
	}
	return func() { release(); leave() }, nil
}

// Enter counts a request of scope in flight; ok is false, and nothing
// counted, when the scope is at RequestsPerScope. leave ends it.
func (l *Limiter) Enter(scope string) (leave func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inScope[scope] >= l.cfg.RequestsPerScope {
		return nil, false
	}
	l.inScope[scope]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inScope[scope]--; l.inScope[scope] == 0 {
			delete(l.inScope, scope)
		}
	}, true
}

// Reserve reserves n bytes of BodyMemory; ok is false, and nothing
// reserved, when they would pass it. release gives them back.
func (l *Limiter) Reserve(n int64) (release func(), ok bool) {
	if l.held.Add(n) > l.cfg.BodyMemory {
		l.held.Add(-n)
		return nil, false
	}
	return func() { l.held.Add(-n) }, true
}

// read reads at most size bytes of the body before the body deadline.
func (l *Limiter) read(w http.ResponseWriter, r *http.Request, size int64) ([]byte, error) {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(l.cfg.BodyTimeout)); err != nil {
		return nil, fmt.Errorf("set body deadline: %w", err)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, size)); err != nil {
		return nil, err
	}
	// The rest of the request's time is the server's own timeouts'.
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear body deadline: %w", err)
	}
	return buf.Bytes(), nil
}

// retryLater is the answer to a request refused for a bound, with
// Retry-After.
func retryLater(name string, status int, detail string) *idem.Response {
	return &idem.Response{StatusCode: status, Body: problem(name, status, detail), Header: http.Header{
		"Content-Type":         {"application/problem+json"},
		"Retry-After":          {strconv.Itoa(RetryAfter)},
		idem.HeaderShouldRetry: {"true"},
	}}
}

var titles = map[string]string{
	ProblemBodyTimeout:     "Request body timeout",
	ProblemOverloaded:      "Overloaded",
	ProblemTooManyRequests: "Too many requests",
	ProblemBodyInvalid:     "Request body invalid",
}

// writeProblem answers an RFC 9457 problem.
func writeProblem(w http.ResponseWriter, name string, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set(idem.HeaderShouldRetry, idem.ShouldRetryHeader(status))
	w.WriteHeader(status)
	_, _ = w.Write(problem(name, status, detail))
}

// problem is an RFC 9457 problem's body, in the shape of the middleware's
// own.
func problem(name string, status int, detail string) []byte {
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{idem.DefaultProblemTypeBase + name, titles[name], status, detail})
	return append(b, '\n')
}
