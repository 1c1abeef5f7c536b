package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// User is one paymentsd user; each client worker is one.
type User struct {
	ID     string `json:"user_id"`
	APIKey string `json:"api_key"`
}

// Attempt is one request a client sent and what came back of it.
type Attempt struct {
	Status     int // 0: no complete response (timeout, broken connection, dropped by the client)
	Body       []byte
	Replayed   bool
	RetryAfter string
	Err        string
	At         time.Time
	Took       time.Duration
}

// Final reports whether the attempt is the request's last word: any
// complete response but a 5xx, 408, 429, or a 409 that carries Retry-After
// (in flight, or a lost lease). A 409 without it is a business net's final
// refusal.
func (a Attempt) Final() bool {
	switch {
	case a.Status == 0 || a.Status >= 500 || a.Status == http.StatusRequestTimeout || a.Status == http.StatusTooManyRequests:
		return false
	case a.Status == http.StatusConflict && a.RetryAfter != "":
		return false
	}
	return true
}

// OpKind is what a logical request asks for.
type OpKind string

// The kinds of operation.
const (
	OpDeposit     OpKind = "deposit"
	OpTransaction OpKind = "transaction"
	// OpReuse sends a key already used by an earlier op with another body:
	// the answer must be 422, and nothing may move.
	OpReuse OpKind = "reuse"
	// OpInvalid asks for something the service refuses (an unsupported
	// currency): a final 400 that is stored and replayed.
	OpInvalid OpKind = "invalid"
)

// Op is one logical request: one key, one body, however many times it is
// sent.
type Op struct {
	User     *User
	Key      string
	Kind     OpKind
	Path     string
	Body     []byte
	Scenario string
	// Late: the op belongs to the short-TTL scenario, where a retry after
	// the key's retention may legitimately run it again.
	Late bool
	// Reused is the op whose key an OpReuse borrows.
	Reused *Op

	mu       sync.Mutex // guards Attempts
	Attempts []Attempt
}

func (o *Op) record(a Attempt) {
	o.mu.Lock()
	o.Attempts = append(o.Attempts, a)
	o.mu.Unlock()
}

// Answers returns a copy of the attempts.
func (o *Op) Answers() []Attempt {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Attempt(nil), o.Attempts...)
}

// FinalAnswer is the first final answer the client got, if any.
func (o *Op) FinalAnswer() (Attempt, bool) {
	for _, a := range o.Answers() {
		if a.Final() {
			return a, true
		}
	}
	return Attempt{}, false
}

// SDKConfig is how the client SDK retries.
type SDKConfig struct {
	Timeout     time.Duration // per attempt
	MaxAttempts int           // per op and caller
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

// Client is the SDK a worker calls paymentsd with: it retries with the same
// key after a timeout, a broken connection, a 5xx, or a 409 that carries
// Retry-After (honouring it).
type Client struct {
	base  string
	hc    *http.Client
	cfg   SDKConfig
	stats *Stats
	rng   *rand.Rand
	mu    sync.Mutex // guards rng
}

// NewClient returns a client of the service at base.
func NewClient(base string, cfg SDKConfig, stats *Stats, seed uint64) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{base: base, hc: &http.Client{Transport: tr, Timeout: cfg.Timeout}, cfg: cfg, stats: stats,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) jitter(d time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return d/2 + time.Duration(c.rng.Int64N(int64(d)+1))
}

// Send sends op once and records the attempt.
func (c *Client) Send(ctx context.Context, op *Op) Attempt {
	c.stats.Requests.Add(1)
	a := c.do(ctx, op.User, http.MethodPost, op.Path, op.Body, op.Key)
	switch {
	case a.Status == 0:
		c.stats.NoResponse.Add(1)
	case a.Status >= 500:
		c.stats.ServerErrors.Add(1)
	case a.Status == http.StatusConflict && a.RetryAfter != "" && bytes.Contains(a.Body, []byte("lease-lost")):
		c.stats.LockLost.Add(1)
	case a.Status == http.StatusConflict && a.RetryAfter != "":
		c.stats.InFlight.Add(1)
	case a.Status == http.StatusConflict:
		c.stats.NetRefusals.Add(1)
	}
	if a.Replayed {
		c.stats.Replays.Add(1)
	}
	op.record(a)
	return a
}

// UntilFinal sends op until it gets a final answer, MaxAttempts run out or
// deadline passes. first says whether the first send is a retry already
// (after a dropped connection).
func (c *Client) UntilFinal(ctx context.Context, op *Op, deadline time.Time, retry bool) (Attempt, bool) {
	var a Attempt
	for n := 0; n < c.cfg.MaxAttempts; n++ {
		if n > 0 || retry {
			c.stats.Retries.Add(1)
		}
		a = c.Send(ctx, op)
		if a.Final() {
			return a, true
		}
		wait := c.backoff(n)
		if a.Status == http.StatusConflict {
			// Retry-After is in whole seconds here; honour it, plus jitter so
			// a double tap's legs do not stay in lockstep.
			if s, err := strconv.Atoi(a.RetryAfter); err == nil && s >= 0 {
				wait = time.Duration(s)*time.Second + c.jitter(100*time.Millisecond)
			}
		}
		if time.Now().Add(wait).After(deadline) {
			return a, false
		}
		select {
		case <-ctx.Done():
			return a, false
		case <-time.After(wait):
		}
	}
	return a, false
}

func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.BaseBackoff << min(n, 10)
	return c.jitter(min(d, c.cfg.MaxBackoff))
}

// do sends one request; a response counts only when its body arrived whole.
func (c *Client) do(ctx context.Context, u *User, method, path string, body []byte, key string) (a Attempt) {
	a.At = time.Now()
	defer func() { a.Took = time.Since(a.At) }()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	req.Header.Set("Authorization", "Bearer "+u.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.Err = fmt.Sprintf("status %d, body cut: %v", resp.StatusCode, err)
		return a
	}
	a.Status, a.Body = resp.StatusCode, b
	a.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	a.RetryAfter = resp.Header.Get("Retry-After")
	return a
}

// Get sends an unkeyed GET as u.
func (c *Client) Get(ctx context.Context, u *User, path string) Attempt {
	return c.do(ctx, u, http.MethodGet, path, nil, "")
}

// Drop writes op's request on a raw connection and closes it before any
// answer can come: a phone that loses its network right after sending.
func (c *Client) Drop(op *Op, after time.Duration, reset bool) {
	c.stats.Requests.Add(1)
	c.stats.Drops.Add(1)
	defer op.record(Attempt{At: time.Now(), Err: "dropped by the client"})
	u, err := url.Parse(c.base)
	if err != nil {
		return
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", op.Path, u.Host, op.User.APIKey, op.Key, len(op.Body))
	b.Write(op.Body)
	_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(b.Bytes()); err != nil {
		return
	}
	time.Sleep(after)
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0) // RST instead of FIN
	}
}
