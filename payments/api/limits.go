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

// Bounds holds what the requests in flight hold of Limits: the bodies'
// bytes and each user's requests. One Bounds shared by every door (HTTP,
// gRPC) bounds a user whichever door they come by.
type Bounds struct {
	limits  Limits
	held    atomic.Int64 // body bytes reserved by requests in flight
	mu      sync.Mutex   // guards perUser
	perUser map[string]int
}

// NewBounds returns the Bounds of l (its zero fields the defaults).
func NewBounds(l Limits) (*Bounds, error) {
	l, err := l.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Bounds{limits: l, perUser: map[string]int{}}, nil
}

// Limits returns the limits in force, defaults filled in.
func (b *Bounds) Limits() Limits { return b.limits }

// Admit admits one of user's requests, reserving size bytes of body: done
// gives them back. A request past a bound is refused with the answer to
// send (429 too-many-requests or 503 overloaded, with Retry-After), and
// holds nothing.
func (b *Bounds) Admit(user string, size int64) (done func(), refusal *idem.Response) {
	if !b.enter(user) {
		return nil, retryLater(ProblemTooManyRequests, http.StatusTooManyRequests,
			fmt.Sprintf("You have %d requests in flight, the most allowed; nothing was stored. Retry after Retry-After seconds.", b.limits.RequestsPerUser))
	}
	if b.held.Add(size) > b.limits.BodyMemory {
		b.held.Add(-size)
		b.leave(user)
		return nil, retryLater(ProblemOverloaded, http.StatusServiceUnavailable,
			"The server is receiving too many request bodies at once; nothing was stored. Retry after Retry-After seconds.")
	}
	return func() { b.held.Add(-size); b.leave(user) }, nil
}

func (b *Bounds) enter(user string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.perUser[user] >= b.limits.RequestsPerUser {
		return false
	}
	b.perUser[user]++
	return true
}

func (b *Bounds) leave(user string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.perUser[user]--; b.perUser[user] == 0 {
		delete(b.perUser, user)
	}
}

// limiter enforces Bounds in front of the idempotency middleware: it reads
// the body itself, within the deadline and the memory bound, and hands the
// middleware the bytes.
type limiter struct {
	*Bounds
	maxBody   int64  // the middleware's body limit: a larger body is its 413
	keyHeader string // the middleware's key header, named in the 408
}

func newLimiter(b *Bounds, cfg idem.Config) *limiter {
	return &limiter{Bounds: b, maxBody: MaxBody(cfg), keyHeader: cfg.Header}
}

// MaxBody is the largest request body the middleware configured by cfg
// takes: a larger one is its 413 (a gRPC message, grpc-go's
// ResourceExhausted).
func MaxBody(cfg idem.Config) int64 {
	if cfg.MaxRequestBytes <= 0 { // a Config not built by idem.New: its default
		return idem.DefaultMaxRequestBytes
	}
	return cfg.MaxRequestBytes
}

// wrap bounds next, a route that moves money, behind authentication.
func (l *limiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One byte past the middleware's limit, so that it still sees a
		// body too large and answers 413.
		size := l.maxBody + 1
		if r.ContentLength >= 0 && r.ContentLength < size {
			size = r.ContentLength
		}
		done, refusal := l.Admit(userOf(r), size)
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

// retryAfter is the Retry-After of a request refused for a bound: the
// bounds are of requests in flight, which end within seconds.
const retryAfter = 1

// retryLater is the answer to a request refused for a bound, with
// Retry-After.
func retryLater(t ProblemType, status int, detail string) *idem.Response {
	w := &replyWriter{header: http.Header{}}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeProblem(w, t, status, detail)
	r := w.reply()
	return &r
}
