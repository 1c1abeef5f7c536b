package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/idem-dev/idem"
)

// route is one guarded route: a method and a path, or a path prefix when
// the pattern ended in '*'.
type route struct {
	method, path string
	prefix       bool
}

func parseRoutes(s string) ([]route, error) {
	var rs []route
	for _, part := range strings.Split(s, ",") {
		method, path, ok := strings.Cut(strings.TrimSpace(part), " ")
		path = strings.TrimSpace(path)
		if !ok || method == "" || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("%q: want 'METHOD /path'", strings.TrimSpace(part))
		}
		r := route{method: strings.ToUpper(method), path: path}
		if strings.HasSuffix(path, "*") {
			r.path, r.prefix = strings.TrimSuffix(path, "*"), true
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func (r route) match(req *http.Request) bool {
	if req.Method != r.method {
		return false
	}
	if r.prefix {
		return strings.HasPrefix(req.URL.Path, r.path)
	}
	return req.URL.Path == r.path
}

// gateway is the proxy and what it guards.
type gateway struct {
	upstream    *url.URL
	routes      []route
	scopeHeader string
	timeout     time.Duration
	dedups      bool
}

// The gateway's own problem types.
const (
	// problemOutcomeUnknown: the request reached the upstream and no answer
	// came back (timeout, broken connection), or an earlier gateway that
	// held its key was cut off (idem.PriorAttemptLapsed). It is stored:
	// every retry gets it, and the request is never sent again, unless the
	// upstream deduplicates (--upstream-dedups).
	problemOutcomeUnknown = "outcome-unknown"
	// problemUpstreamUnavailable: the upstream could not be reached, or
	// (when it deduplicates) gave no answer; not stored, retry.
	problemUpstreamUnavailable = "upstream-unavailable"
)

// handler guards the configured routes with mw and proxies everything to
// the upstream. Upgrades (websockets) and event streams pass unguarded.
func (g *gateway) handler(mw *idem.Middleware) http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(g.upstream)
			pr.Out.Host = pr.In.Host
			if key := idem.KeyFromContext(pr.In.Context()); key != "" {
				pr.Out.Header.Set("Idempotency-Key", derivedKey(pr.In.Header.Get(g.scopeHeader), key))
			}
		},
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			ResponseHeaderTimeout: g.timeout,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
		},
		ErrorHandler: g.upstreamFailed,
	}
	guarded := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idem.PriorAttemptLapsed(r.Context()) && !g.dedups {
			// A gateway that held the key died or stalled, maybe after
			// forwarding it: the upstream may have acted.
			writeOutcomeUnknown(w, "An earlier attempt with this key was cut off, maybe after it reached the upstream: it may or may not have taken effect. ")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") || !g.guards(r) {
			proxy.ServeHTTP(w, r)
			return
		}
		if v := r.Header.Get(g.scopeHeader); v != "" {
			r = r.WithContext(idem.WithScope(r.Context(), scopeOf(v)))
		}
		guarded.ServeHTTP(w, r)
	})
}

func (g *gateway) guards(r *http.Request) bool {
	for _, rt := range g.routes {
		if rt.match(r) {
			return true
		}
	}
	return false
}

// upstreamFailed answers a request that got no response from the
// upstream. When the connection was never made, nothing was sent: 502,
// not stored, retry. Otherwise the upstream may have acted: unless it
// deduplicates on the forwarded key, the answer is the stored
// outcome-unknown problem, so that no retry runs it a second time.
func (g *gateway) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	var op *net.OpError
	notSent := errors.As(err, &op) && op.Op == "dial"
	switch {
	case idem.KeyFromContext(r.Context()) == "" || notSent || g.dedups:
		writeProblem(w, problemUpstreamUnavailable, http.StatusBadGateway, "The upstream gave no answer; retry with the same key.")
	default:
		writeOutcomeUnknown(w, "The request reached the upstream and no answer came back: it may or may not have taken effect. ")
	}
}

// writeOutcomeUnknown answers the outcome-unknown problem, which the
// middleware stores: no retry sends the request again.
func writeOutcomeUnknown(w http.ResponseWriter, what string) {
	writeProblem(w, problemOutcomeUnknown, http.StatusConflict,
		what+"The gateway will not send it again; an operator must find out what happened upstream.")
}

func writeProblem(w http.ResponseWriter, name string, status int, detail string) {
	b, _ := json.Marshal(map[string]any{
		"type": idem.DefaultProblemTypeBase + name, "title": problemTitles[name], "status": status, "detail": detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

var problemTitles = map[string]string{
	problemOutcomeUnknown:      "Outcome unknown",
	problemUpstreamUnavailable: "Upstream unavailable",
}

// scopeOf is the key space of a scope header's value: its SHA-256, so the
// gateway stores no credential.
func scopeOf(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// derivedKey is the key forwarded upstream: stable across the client's
// retries, distinct per scope, never the client's raw key.
func derivedKey(scopeValue, key string) string {
	sum := sha256.Sum256([]byte("idem-gateway\x00" + scopeOf(scopeValue) + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}
