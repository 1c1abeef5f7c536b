package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// retryableStatus reports whether a response with status and header asks
// for a retry: what its Idempotent-Should-Retry says, else 408, 429, 5xx,
// and a 409 with Retry-After.
func retryableStatus(status int, header http.Header) bool {
	switch header.Get("Idempotent-Should-Retry") {
	case "true":
		return status >= 400 // never a success, whatever a server says
	case "false":
		return false
	}
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500 && status <= 599:
		return true
	case status == http.StatusConflict:
		return header.Get("Retry-After") != ""
	}
	return false
}

// retryableError reports whether an attempt's error is a failure of the
// connection or of the attempt's time, which a retry may not meet, rather
// than a request that cannot succeed (a bad URL, an untrusted certificate).
// The request's own context is checked before: its end is never retried.
func retryableError(err error) bool {
	var (
		cert   *tls.CertificateVerificationError
		netErr net.Error
	)
	switch {
	case errors.As(err, &cert):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	return errors.As(err, &netErr)
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110, 10.2.3). A date in the past is no wait.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(1<<33))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// jitter returns a random duration in [0, d] ("full jitter").
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
