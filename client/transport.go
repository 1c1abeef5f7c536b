package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Transport is an [http.RoundTripper] that keys unsafe requests and retries
// them with the same key; the package documentation says when. Its zero
// value works; every field documents its default. A Transport is safe for
// concurrent use and must not be changed once in use.
type Transport struct {
	// Base sends each attempt. Default http.DefaultTransport.
	Base http.RoundTripper
	// MaxAttempts bounds the attempts of one request, the first included;
	// 1 turns retries off. Default 4.
	MaxAttempts int
	// AttemptTimeout bounds one attempt, from sending the request until its
	// response is read (a response too large to buffer: until its body is
	// closed). An attempt past it is retried. Default 30 s; negative: no
	// bound but the request's context.
	AttemptTimeout time.Duration
	// BaseDelay is the cap of the first retry's random wait; each retry
	// doubles it. Default 250 ms.
	BaseDelay time.Duration
	// MaxDelay caps the random wait between attempts. Default 8 s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a response asking
	// for a longer wait is returned to the caller. Default 60 s.
	MaxRetryAfter time.Duration
	// Header is the key's header. Default "Idempotency-Key".
	Header string
	// NewKeyFunc returns the key of an unsafe request sent without one.
	// Default NewKey (a UUIDv7).
	NewKeyFunc func() string
	// MaxBodyBytes is how much of a request body without GetBody is
	// buffered so that it can be sent again; a longer body is sent once and
	// never retried. Default 1 MiB (the idem middleware's request limit).
	MaxBodyBytes int64
	// MaxResponseBytes is how much of a response is read before RoundTrip
	// returns; a longer response is returned as it streams, and never
	// retried. Default 1 MiB (the idem middleware's stored-response limit);
	// negative: responses are never buffered, so a body cut mid-way is the
	// caller's error, not a retry.
	MaxResponseBytes int64
	// AttemptFunc, when set, is called after each attempt with what it got,
	// before the wait for the next one: for metrics and logs. It must not
	// block.
	AttemptFunc func(Attempt)

	// sleep waits d or until ctx is done, and jitter returns a random
	// duration in [0, d]: replaced by the tests so that back-off is
	// asserted without waiting.
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(d time.Duration) time.Duration
	now    func() time.Time
}

// Attempt is one attempt of a request, as Transport.AttemptFunc sees it.
type Attempt struct {
	// N counts the request's attempts from 1.
	N int
	// Method and URL are the request's; Key is the key sent ("" for a safe
	// request sent without one).
	Method, URL, Key string
	// Status is the response's status; 0 when no whole response arrived
	// (Err says why).
	Status int
	// Header is the response's header, nil without a response.
	Header http.Header
	// Body is the response body when it was buffered (see
	// Transport.MaxResponseBytes); the caller of RoundTrip still gets it
	// whole. It must not be modified.
	Body []byte
	// Err is why the attempt got no whole response.
	Err error
	// Start is when the attempt was sent; Took how long it lasted.
	Start time.Time
	Took  time.Duration
	// Retry says whether another attempt follows, after Wait.
	Retry bool
	Wait  time.Duration
}

// RetryError is the error of a request whose last attempt got no response.
type RetryError struct {
	Key      string // the key sent with every attempt; "" for a safe request without one
	Attempts int    // how many attempts were sent
	Err      error  // the last attempt's error
}

func (e *RetryError) Error() string {
	s := "attempt " + strconv.Itoa(e.Attempts)
	if e.Key != "" {
		s += " with key " + e.Key
	}
	return s + ": " + e.Err.Error()
}

func (e *RetryError) Unwrap() error { return e.Err }

// Defaults of the Transport fields.
const (
	DefaultMaxAttempts      = 4
	DefaultAttemptTimeout   = 30 * time.Second
	DefaultBaseDelay        = 250 * time.Millisecond
	DefaultMaxDelay         = 8 * time.Second
	DefaultMaxRetryAfter    = 60 * time.Second
	DefaultHeader           = "Idempotency-Key"
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxResponseBytes = 1 << 20
)

// settings returns t with every default filled in.
func (t *Transport) settings() Transport {
	s := *t
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.AttemptTimeout, DefaultAttemptTimeout)
	def(&s.BaseDelay, DefaultBaseDelay)
	def(&s.MaxDelay, DefaultMaxDelay)
	def(&s.MaxRetryAfter, DefaultMaxRetryAfter)
	if s.Base == nil {
		s.Base = http.DefaultTransport
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.Header == "" {
		s.Header = DefaultHeader
	}
	if s.NewKeyFunc == nil {
		s.NewKeyFunc = NewKey
	}
	if s.MaxBodyBytes <= 0 {
		s.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.MaxResponseBytes == 0 {
		s.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if s.sleep == nil {
		s.sleep = sleep
	}
	if s.jitter == nil {
		s.jitter = jitter
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// RoundTrip sends req until an attempt gets a final answer or the retries
// end (see the package documentation), and returns the last attempt's
// response.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.settings()
	ctx := req.Context()
	body, err := newRewinder(req, s.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	r := req.Clone(ctx)
	key := r.Header.Get(s.Header)
	if key == "" && !safe(req.Method) {
		key = s.NewKeyFunc()
		r.Header.Set(s.Header, key)
	}
	for n := 1; ; n++ {
		a := Attempt{N: n, Method: r.Method, URL: r.URL.Redacted(), Key: key, Start: s.now()}
		resp, buffered, err := s.attempt(r, body, n)
		a.Took = s.now().Sub(a.Start)
		if err != nil {
			a.Err = err
		} else {
			a.Status, a.Header = resp.StatusCode, resp.Header
			if buffered {
				a.Body = resp.Body.(*bufferedBody).b
			}
		}
		a.Retry, a.Wait = s.next(ctx, a, body.rewindable() && (err != nil || buffered))
		if s.AttemptFunc != nil {
			s.AttemptFunc(a)
		}
		if !a.Retry {
			if err != nil {
				return nil, &RetryError{Key: key, Attempts: n, Err: err}
			}
			return resp, nil
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		if err := s.sleep(ctx, a.Wait); err != nil {
			if resp != nil {
				return resp, nil // buffered: still whole after Close
			}
			return nil, &RetryError{Key: key, Attempts: n, Err: a.Err}
		}
	}
}

// attempt sends attempt n of r and reads its response whole when it fits
// in MaxResponseBytes. A body cut mid-way is an error.
func (t *Transport) attempt(r *http.Request, body *rewinder, n int) (resp *http.Response, buffered bool, err error) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if t.AttemptTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.AttemptTimeout)
	}
	ar := r.Clone(ctx)
	if ar.Body, err = body.open(n); err != nil {
		cancel()
		return nil, false, fmt.Errorf("rewind the request body: %w", err)
	}
	if ar.Body != nil && ar.Body != http.NoBody {
		ar.GetBody = body.get // for the base transport's own resend of a request it did not write
	}
	resp, err = t.Base.RoundTrip(ar)
	if err != nil {
		cancel()
		return nil, false, err
	}
	resp.Request = ar
	buffered, err = readResponse(resp, t.MaxResponseBytes, cancel)
	if err != nil {
		return nil, false, err
	}
	return resp, buffered, nil
}

// next decides whether attempt a is followed by another, and after what
// wait. rewindable says whether the request can be sent again (its body
// rewound, its response buffered).
func (t *Transport) next(ctx context.Context, a Attempt, rewindable bool) (bool, time.Duration) {
	if !rewindable || a.N >= t.MaxAttempts || ctx.Err() != nil {
		return false, 0
	}
	if a.Err != nil && !retryableError(a.Err) {
		return false, 0
	}
	if a.Err == nil && !retryableStatus(a.Status, a.Header) {
		return false, 0
	}
	wait := t.jitter(min(t.MaxDelay, t.BaseDelay<<min(a.N-1, 30)))
	if a.Err == nil {
		if ra, ok := retryAfter(a.Header, t.now()); ok {
			if ra > t.MaxRetryAfter {
				return false, 0
			}
			wait = ra + t.jitter(t.BaseDelay)
		}
	}
	if d, ok := ctx.Deadline(); ok && !t.now().Add(wait).Before(d) {
		return false, 0
	}
	return true, wait
}

// safe reports whether method is safe (RFC 9110, 9.2.1): such requests
// get no key.
func safe(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// Replayed reports whether resp is the stored answer of an earlier request
// with the same key (Idempotent-Replayed: true), rather than the result of
// this one's execution.
func Replayed(resp *http.Response) bool {
	return resp != nil && resp.Header.Get("Idempotent-Replayed") == "true"
}

func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// CloseIdleConnections closes the idle connections of Base (when it has
// any to close), so that http.Client.CloseIdleConnections reaches them.
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
