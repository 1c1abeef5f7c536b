package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/idem-dev/idem/client"
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

// SDKConfig is how the client SDK retries: the settings of its
// client.Transport.
type SDKConfig struct {
	Timeout     time.Duration // per attempt
	MaxAttempts int           // per op and caller
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

// Client is the SDK a worker calls paymentsd with: package client's
// retrying transport, which sends the same key again after a timeout, a
// broken connection, a 5xx, 408, 429, or a 409 that carries Retry-After
// (honouring it), with full-jitter back-off. Every attempt is recorded on
// its op and counted.
type Client struct {
	base  string
	conns *http.Transport // shared by every call
	cfg   SDKConfig
	stats *Stats
}

// NewClient returns a client of the service at base.
func NewClient(base string, cfg SDKConfig, stats *Stats) *Client {
	conns := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{base: base, conns: conns, cfg: cfg, stats: stats}
}

// Close drops idle connections.
func (c *Client) Close() { c.conns.CloseIdleConnections() }

// Send sends op once and records the attempt.
func (c *Client) Send(ctx context.Context, op *Op) Attempt {
	return c.call(ctx, op, op.User, http.MethodPost, op.Path, op.Body, op.Key, 1, false)
}

// UntilFinal sends op until it gets a final answer, MaxAttempts run out or
// the next attempt would start past deadline, which also ends the attempt
// under way. retry says whether the first send is a retry already (after
// a dropped connection).
func (c *Client) UntilFinal(ctx context.Context, op *Op, deadline time.Time, retry bool) (Attempt, bool) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	a := c.call(ctx, op, op.User, http.MethodPost, op.Path, op.Body, op.Key, c.cfg.MaxAttempts, retry)
	return a, a.Final()
}

// Get sends an unkeyed GET as u, with the client's retries, unrecorded.
func (c *Client) Get(ctx context.Context, u *User, path string) Attempt {
	return c.call(ctx, nil, u, http.MethodGet, path, nil, "", c.cfg.MaxAttempts, false)
}

// call sends one request, in up to attempts attempts, records each on op
// (when not nil) and returns the last. A response counts only when its body
// arrived whole: the transport reads it, and retries one that was cut.
func (c *Client) call(ctx context.Context, op *Op, u *User, method, path string, body []byte, key string, attempts int, retry bool) Attempt {
	var last Attempt
	tr := &client.Transport{
		Base: c.conns, MaxAttempts: attempts, AttemptTimeout: c.cfg.Timeout,
		BaseDelay: c.cfg.BaseBackoff, MaxDelay: c.cfg.MaxBackoff,
		AttemptFunc: func(ca client.Attempt) {
			last = attemptOf(ca)
			if op != nil {
				c.count(last, retry || ca.N > 1)
				op.record(last)
			}
		},
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return Attempt{Err: err.Error(), At: time.Now()}
	}
	req.Header.Set("Authorization", "Bearer "+u.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		_ = resp.Body.Close() // read whole by the transport: the attempt has it
	} else if last.At.IsZero() {
		return Attempt{Err: err.Error(), At: time.Now()} // no attempt was sent
	}
	return last
}

// attemptOf is the harness's record of one of the transport's attempts.
func attemptOf(ca client.Attempt) Attempt {
	a := Attempt{At: ca.Start, Took: ca.Took}
	if ca.Err != nil {
		a.Err = ca.Err.Error()
		return a
	}
	a.Status, a.Body = ca.Status, ca.Body
	a.Replayed = ca.Header.Get("Idempotent-Replayed") == "true"
	a.RetryAfter = ca.Header.Get("Retry-After")
	return a
}

// count adds one attempt to the run's figures.
func (c *Client) count(a Attempt, retry bool) {
	c.stats.Requests.Add(1)
	if retry {
		c.stats.Retries.Add(1)
	}
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
