package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// server is an httptest server whose handler is chosen per attempt; it
// records what every attempt sent.
type server struct {
	*httptest.Server
	answer func(n int, w http.ResponseWriter, r *http.Request)

	mu     sync.Mutex // guards keys and bodies
	keys   []string
	bodies []string
}

func newServer(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.bodies = append(s.bodies, string(b))
		n := len(s.keys)
		s.mu.Unlock()
		s.answer(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// attempts returns the keys and bodies the server received, one per attempt.
func (s *server) attempts() (keys, bodies []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...), append([]string(nil), s.bodies...)
}

// failing answers the first n attempts with fail, then 201 {"ok":true}.
func failing(n int, fail func(w http.ResponseWriter, r *http.Request)) func(int, http.ResponseWriter, *http.Request) {
	return func(i int, w http.ResponseWriter, r *http.Request) {
		if i <= n {
			fail(w, r)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}
}

func status(code int, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"status":"failed"}`)
	}
}

// clock is the tests' time: sleeping advances it, nothing waits.
type clock struct {
	mu     sync.Mutex // guards now and waits
	now    time.Time
	waits  []time.Duration
	cancel context.CancelFunc // when set, called on the first sleep
}

func newClock() *clock { return &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return ctx.Err()
}

func (c *clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// fakeTransport returns a Transport on c's time whose jitter is always its
// whole range (so waits are exact), over connections that are never
// reused, so that net/http's own resend on a reused connection cannot add
// attempts the test does not count.
func fakeTransport(c *clock) *Transport {
	return &Transport{
		Base:   &http.Transport{DisableKeepAlives: true},
		sleep:  c.sleep,
		now:    c.Now,
		jitter: func(d time.Duration) time.Duration { return d },
	}
}

func post(t *testing.T, tr http.RoundTripper, url, body string, header ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b, nil
}

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// sameKey checks that the server got want attempts, all with one generated
// key and the same body.
func sameKey(t *testing.T, s *server, want int, body string) string {
	t.Helper()
	keys, bodies := s.attempts()
	if len(keys) != want {
		t.Fatalf("server got %d attempts, want %d", len(keys), want)
	}
	for i := range keys {
		if keys[i] != keys[0] || bodies[i] != body {
			t.Fatalf("attempt %d sent key %q body %q; attempt 1 sent %q %q", i+1, keys[i], bodies[i], keys[0], body)
		}
	}
	if !uuidV7.MatchString(keys[0]) {
		t.Fatalf("generated key %q is not a UUIDv7", keys[0])
	}
	return keys[0]
}

func TestRetriedStatuses(t *testing.T) {
	t.Parallel()
	cases := map[string]func(http.ResponseWriter, *http.Request){
		"500":               status(500),
		"502":               status(502),
		"503":               status(503),
		"504":               status(504),
		"408":               status(408),
		"429":               status(429),
		"409WithRetryAfter": status(409, "Retry-After", "1"),
		"409ShouldRetry":    status(409, "Idempotent-Should-Retry", "true"),
	}
	for name, fail := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, failing(2, fail))
			var seen []Attempt
			tr := fakeTransport(newClock())
			tr.AttemptFunc = func(a Attempt) { seen = append(seen, a) }
			resp, body, err := post(t, tr, s.URL, `{"amount":1}`)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 201 || string(body) != `{"ok":true}` || !Replayed(resp) {
				t.Fatalf("got %d %q replayed=%v, want the third attempt's 201", resp.StatusCode, body, Replayed(resp))
			}
			key := sameKey(t, s, 3, `{"amount":1}`)
			if len(seen) != 3 || !seen[0].Retry || !seen[1].Retry || seen[2].Retry || seen[2].Key != key || seen[0].Status == 0 {
				t.Fatalf("AttemptFunc saw %+v", seen)
			}
		})
	}
}

func TestFinalStatuses(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 402, 403, 404, 405, 409, 410, 413, 415, 422} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			s := newServer(t, failing(1, status(code)))
			resp, body, err := post(t, fakeTransport(newClock()), s.URL, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != code || string(body) != `{"status":"failed"}` {
				t.Fatalf("got %d %q, want the first answer", resp.StatusCode, body)
			}
			sameKey(t, s, 1, `{}`)
		})
	}
}

// TestFinalByHeader: Idempotent-Should-Retry: false makes any status
// final: a stored 500 (response-too-large) or a 503 is returned at once.
func TestFinalByHeader(t *testing.T) {
	t.Parallel()
	for _, code := range []int{500, 503} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			s := newServer(t, failing(1, status(code, "Idempotent-Should-Retry", "false")))
			resp, _, err := post(t, fakeTransport(newClock()), s.URL, `{}`)
			if err != nil || resp.StatusCode != code {
				t.Fatalf("got %v, %v; want the first answer", resp, err)
			}
			sameKey(t, s, 1, `{}`)
		})
	}
}

// hijack takes the connection of a request whose body was read and closes
// it without an answer; reset makes the close a TCP RST.
func hijack(reset bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		if reset {
			_ = conn.(*net.TCPConn).SetLinger(0)
		}
		_ = conn.Close()
	}
}

// cut sends the headers and part of the body, then closes the connection.
func cut(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	_, _ = buf.WriteString("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":")
	_ = buf.Flush()
	_ = conn.Close()
}

func TestRetriedConnectionFailures(t *testing.T) {
	t.Parallel()
	cases := map[string]func(http.ResponseWriter, *http.Request){
		"ClosedAfterRequest": hijack(false),
		"ResetAfterRequest":  hijack(true),
		"BodyCut":            cut,
		"SlowAnswer": func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // past the attempt's timeout the client goes away
		},
	}
	for name, fail := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, failing(2, fail))
			tr := fakeTransport(newClock())
			// Long enough for the third attempt's answer on a busy machine:
			// only SlowAnswer's first two attempts wait it out.
			tr.AttemptTimeout = 2 * time.Second
			var errs []error
			tr.AttemptFunc = func(a Attempt) { errs = append(errs, a.Err) }
			resp, body, err := post(t, tr, s.URL, `{"amount":1}`)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 201 || string(body) != `{"ok":true}` {
				t.Fatalf("got %d %q, want the third attempt's 201", resp.StatusCode, body)
			}
			sameKey(t, s, 3, `{"amount":1}`)
			if errs[0] == nil || errs[1] == nil || errs[2] != nil {
				t.Fatalf("attempt errors %v", errs)
			}
		})
	}
}

func TestAttemptLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t, failing(100, status(503)))
	c := newClock()
	resp, body, err := post(t, fakeTransport(c), s.URL, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || string(body) != `{"status":"failed"}` {
		t.Fatalf("got %d %q, want the last 503 whole", resp.StatusCode, body)
	}
	sameKey(t, s, DefaultMaxAttempts, `{}`)
	want := []time.Duration{DefaultBaseDelay, 2 * DefaultBaseDelay, 4 * DefaultBaseDelay}
	if got := c.Waits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

func TestNoResponseError(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	_ = l.Close() // refused from now on
	tr := fakeTransport(newClock())
	tr.MaxAttempts = 3
	_, _, err = post(t, tr, url, `{}`, "Idempotency-Key", "k1")
	var re *RetryError
	if !errors.As(err, &re) || re.Attempts != 3 || re.Key != "k1" {
		t.Fatalf("got %v, want a RetryError after 3 attempts with key k1", err)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	t.Run("ExponentialCapped", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(100, status(500)))
		c := newClock()
		tr := fakeTransport(c)
		tr.MaxAttempts, tr.BaseDelay, tr.MaxDelay = 7, 100*time.Millisecond, time.Second
		_, _, _ = post(t, tr, s.URL, `{}`)
		want := "[100ms 200ms 400ms 800ms 1s 1s]"
		if got := fmt.Sprint(c.Waits()); got != want {
			t.Fatalf("waits %s, want %s", got, want)
		}
	})
	t.Run("FullJitter", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(100, status(500)))
		c := newClock()
		tr := fakeTransport(c)
		tr.jitter = jitter
		tr.MaxAttempts, tr.BaseDelay, tr.MaxDelay = 40, 100*time.Millisecond, time.Second
		_, _, _ = post(t, tr, s.URL, `{}`)
		waits := c.Waits()
		distinct := map[time.Duration]bool{}
		for i, w := range waits {
			if limit := min(time.Second, 100*time.Millisecond<<min(i, 10)); w < 0 || w > limit {
				t.Fatalf("wait %d is %v, outside [0, %v]", i+1, w, limit)
			}
			distinct[w] = true
		}
		if len(waits) != 39 || len(distinct) < 30 {
			t.Fatalf("%d waits, %d distinct: not jittered", len(waits), len(distinct))
		}
	})
	t.Run("RetryAfterSeconds", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(1, status(429, "Retry-After", "3")))
		c := newClock()
		_, _, _ = post(t, fakeTransport(c), s.URL, `{}`)
		if got, want := c.Waits(), 3*time.Second+DefaultBaseDelay; len(got) != 1 || got[0] != want {
			t.Fatalf("waits %v, want [%v]", got, want)
		}
	})
	t.Run("RetryAfterDate", func(t *testing.T) {
		t.Parallel()
		c := newClock()
		at := c.Now().Add(5 * time.Second).Format(http.TimeFormat)
		s := newServer(t, failing(1, status(503, "Retry-After", at)))
		_, _, _ = post(t, fakeTransport(c), s.URL, `{}`)
		if got, want := c.Waits(), 5*time.Second+DefaultBaseDelay; len(got) != 1 || got[0] != want {
			t.Fatalf("waits %v, want [%v]", got, want)
		}
	})
	t.Run("RetryAfterPastCap", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(1, status(503, "Retry-After", "61")))
		resp, _, err := post(t, fakeTransport(newClock()), s.URL, `{}`)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("got %v %v, want the 503", resp, err)
		}
		sameKey(t, s, 1, `{}`)
	})
	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(100, status(503)))
		// The deadline is an hour away in real time, 7 s away on the fake
		// clock, which reaches 3.75 s after the waits of 250ms, 500ms, 1s
		// and 2s; the next wait (4 s) would pass it.
		deadline := time.Now().Add(time.Hour)
		c := &clock{now: deadline.Add(-7 * time.Second)}
		tr := fakeTransport(c)
		tr.MaxAttempts = 100
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader(`{}`))
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("got %v %v, want the last 503", resp, err)
		}
		sameKey(t, s, 5, `{}`)
	})
	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(100, status(503)))
		c := newClock()
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader(`{}`))
		resp, err := fakeTransport(c).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("got %v %v, want the 503 before the cancel", resp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != `{"status":"failed"}` {
			t.Fatalf("body %q", b)
		}
		sameKey(t, s, 1, `{}`)
	})
}

// onlyReader hides everything of a reader but Read: no GetBody for it.
type onlyReader struct{ io.Reader }

func TestBodies(t *testing.T) {
	t.Parallel()
	t.Run("BufferedWithoutGetBody", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(1, status(500)))
		req, _ := http.NewRequest(http.MethodPatch, s.URL, onlyReader{strings.NewReader(`{"a":1}`)})
		if req.GetBody != nil {
			t.Fatal("the test needs a body without GetBody")
		}
		resp, err := fakeTransport(newClock()).RoundTrip(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("got %v %v", resp, err)
		}
		sameKey(t, s, 2, `{"a":1}`)
	})
	t.Run("TooLongToRewind", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, failing(1, status(500)))
		body := strings.Repeat("x", 100)
		req, _ := http.NewRequest(http.MethodPut, s.URL, onlyReader{strings.NewReader(body)})
		tr := fakeTransport(newClock())
		tr.MaxBodyBytes = 10
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 500 {
			t.Fatalf("got %v %v, want the 500: the body cannot be sent again", resp, err)
		}
		sameKey(t, s, 1, body)
	})
	t.Run("ResponseTooLongToBuffer", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("y", 1000)
		s := newServer(t, failing(1, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, long)
		}))
		tr := fakeTransport(newClock())
		tr.MaxResponseBytes = 100
		resp, b, err := post(t, tr, s.URL, `{}`)
		if err != nil || resp.StatusCode != 503 || string(b) != long {
			t.Fatalf("got %v %v, want the whole 503 streamed", resp, err)
		}
		sameKey(t, s, 1, `{}`)
	})
}

func TestKeys(t *testing.T) {
	t.Parallel()
	s := newServer(t, failing(1, status(500)))
	t.Run("CallersKeyKept", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Idempotency-Key", "mine")
		if _, err := fakeTransport(newClock()).RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if keys, _ := s.attempts(); fmt.Sprint(keys) != "[mine mine]" {
			t.Fatalf("keys %v", keys)
		}
		if req.Header.Get("Idempotency-Key") != "mine" || len(req.Header) != 1 {
			t.Fatalf("the caller's request changed: %v", req.Header)
		}
	})
	t.Run("SafeMethodsUnkeyed", func(t *testing.T) {
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
			req, _ := http.NewRequest(m, s.URL, nil)
			if _, err := fakeTransport(newClock()).RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}
		if keys, _ := s.attempts(); fmt.Sprint(keys) != "[mine mine   ]" {
			t.Fatalf("keys %q", keys)
		}
	})
	t.Run("Unique", func(t *testing.T) {
		seen := map[string]bool{}
		for range 1000 {
			k := NewKey()
			if seen[k] || !uuidV7.MatchString(k) {
				t.Fatalf("key %q repeated or malformed", k)
			}
			seen[k] = true
		}
	})
}

func TestZeroValue(t *testing.T) {
	t.Parallel()
	s := newServer(t, failing(0, nil))
	resp, b, err := post(t, &Transport{}, s.URL, `{}`)
	if err != nil || resp.StatusCode != 201 || string(b) != `{"ok":true}` {
		t.Fatalf("got %v %q %v", resp, b, err)
	}
	sameKey(t, s, 1, `{}`)
}

func TestResponseError(t *testing.T) {
	t.Parallel()
	resp := func(status int, ct string) *http.Response {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {ct}, "Idempotent-Replayed": {"true"}}}
	}
	err := ResponseError(resp(402, "application/problem+json"),
		[]byte(`{"type":"https://x/p#insufficient-funds","title":"Insufficient funds","status":402,"detail":"too small"}`))
	var target *Problem
	if !errors.As(fmt.Errorf("deposit: %w", err), &target) || target.Type != "https://x/p#insufficient-funds" ||
		target.Title != "Insufficient funds" || target.Status != 402 || target.Detail != "too small" || !target.Replayed {
		t.Fatalf("got %+v", target)
	}
	if !errors.As(ResponseError(resp(502, "text/html"), []byte("<html>")), &target) ||
		target.Type != "about:blank" || target.Title != "Bad Gateway" || target.Status != 502 {
		t.Fatalf("got %+v", target)
	}
	if ResponseError(resp(201, "application/json"), nil) != nil {
		t.Fatal("a 201 is no problem")
	}
}

// closeCounter counts CloseIdleConnections calls.
type closeCounter struct {
	http.RoundTripper
	closed int
}

func (c *closeCounter) CloseIdleConnections() { c.closed++ }

func TestCloseIdleConnections(t *testing.T) {
	t.Parallel()
	base := &closeCounter{RoundTripper: http.DefaultTransport}
	(&http.Client{Transport: &Transport{Base: base}}).CloseIdleConnections()
	if base.closed != 1 {
		t.Fatalf("base closed %d times, want 1", base.closed)
	}
}
