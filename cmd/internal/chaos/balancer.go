package chaos

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Balancer is the front proxy. Like a cloud load balancer it buffers the
// request body and, when a replica refuses the connection, breaks it or
// does not answer in time, sends the same request to another replica. That
// is exactly how one client request becomes two executions upstream.
type Balancer struct {
	replicas []*Replica
	// timeout is how long a replica has to send its response headers.
	timeout  time.Duration
	attempts int // replicas tried per request, at most
	next     atomic.Uint64
	client   *http.Client
	stats    *Stats
}

// NewBalancer balances over replicas.
func NewBalancer(replicas []*Replica, timeout time.Duration, attempts int, stats *Stats) *Balancer {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: time.Second}).DialContext,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       30 * time.Second,
	}
	return &Balancer{
		replicas: replicas, timeout: timeout, attempts: attempts, stats: stats,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
}

// Close drops the balancer's idle upstream connections.
func (b *Balancer) Close() { b.client.CloseIdleConnections() }

func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away while sending
	}
	tried := make(map[int]bool, b.attempts)
	status := http.StatusBadGateway
	for attempt := range b.attempts {
		rep := b.pick(tried)
		if rep == nil {
			break
		}
		tried[rep.Slot] = true
		base := rep.URL()
		if base == "" {
			continue
		}
		if attempt > 0 {
			b.stats.BalancerRetries.Add(1)
		}
		b.stats.Upstream.Add(1)
		resp, err := b.forward(r, base, body)
		if err == nil {
			defer resp.Body.Close()
			h := w.Header()
			for k, v := range resp.Header {
				h[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		if r.Context().Err() != nil {
			return // the client is gone: nobody to answer, nothing to retry
		}
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			status = http.StatusGatewayTimeout
		}
	}
	w.WriteHeader(status)
}

// pick chooses the next replica round robin, skipping those already
// tried. It has no health checks: a killed replica stays in the rotation at
// its last address, and a request sent there is refused and retried on
// another, as with a load balancer whose view lags behind a crash.
func (b *Balancer) pick(tried map[int]bool) *Replica {
	n := len(b.replicas)
	start := int(b.next.Add(1))
	for i := range n {
		rep := b.replicas[(start+i)%n]
		if !tried[rep.Slot] {
			return rep
		}
	}
	return nil
}

func (b *Balancer) forward(r *http.Request, base string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	req.Header.Set("X-Forwarded-For", r.RemoteAddr)
	return b.client.Do(req)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
