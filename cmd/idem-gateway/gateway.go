package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/limits"
)

// upstream is one service the gateway fronts: the requests whose path
// starts with prefix (the longest such prefix wins) go to url.
type upstream struct {
	name, prefix string
	url          *url.URL
}

// route is one configured route: what the gateway does with the requests
// its pattern matches (the most specific pattern wins).
type route struct {
	pattern pattern
	key     keyMode
	// mw holds the route's keys: its TTL, lease, fingerprint, replayed
	// headers and body limit. nil when key is off.
	mw     *idem.Middleware
	dedups bool // the upstream deduplicates on the forwarded key
	scope  scopeSource
	// proxies forward to each upstream with the route's upstream timeout.
	proxies map[*upstream]*httputil.ReverseProxy
	// guarded is the guard: the bounds, the middleware, the proxy.
	guarded http.Handler
}

// scopeSource is where a route's scope (the key space of its keys) comes
// from: the SHA-256 of a credential header's value (the credential is
// never stored), or, when trusted is set, the value of a header an
// authenticating proxy in front sets, as is. For Authorization, the
// scheme's case is not the credential's: "bearer alice" is "Bearer alice".
type scopeSource struct {
	header  string
	trusted bool
}

// of returns r's scope, or why r's credential cannot scope keys.
func (s scopeSource) of(r *http.Request) (scope, why string) {
	v := r.Header.Get(s.header)
	switch {
	case v == "" || s.trusted:
		return v, ""
	case s.header == "Authorization":
		if v, why = canonicalAuthorization(v); why != "" {
			return "", why
		}
	}
	return scopeOf(v), ""
}

// gateway is the proxy and what it guards.
type gateway struct {
	upstreams []*upstream
	routes    []*route
	// open forwards the requests no route guards, per upstream, without a
	// response deadline: streams and long polls pass.
	open map[*upstream]*httputil.ReverseProxy
	// readHeaders are the headers the gateway reads (the key's, the
	// scopes'), in Go's canonical spelling: under no other spelling may
	// they reach an upstream.
	readHeaders []string
	limiter     *limits.Limiter
	logger      *slog.Logger
	unknown     *prometheus.CounterVec // outcome-unknown answers stored, by route
}

// The gateway's own problem types.
const (
	// problemOutcomeUnknown: the request reached the upstream and no answer
	// came back (timeout, broken connection), or an earlier gateway that
	// held its key was cut off (idem.PriorAttemptLapsed). It is stored:
	// every retry gets it, and the request is never sent again, unless the
	// route's upstream deduplicates (upstream_dedups).
	problemOutcomeUnknown = "outcome-unknown"
	// problemUpstreamUnavailable: the upstream could not be reached, or
	// (when it deduplicates) gave no answer; not stored, retry.
	problemUpstreamUnavailable = "upstream-unavailable"
	// problemNoUpstream: no upstream's prefix matches the path.
	problemNoUpstream = "no-upstream"
	// problemRequestAmbiguous: the request line, or a header the gateway
	// reads or that names what the upstream runs, has a spelling upstreams
	// read in different ways (docs/gateway.md); never forwarded.
	problemRequestAmbiguous = "request-ambiguous"
	// problemRouteUnguarded: an unsafe method that no route matches.
	problemRouteUnguarded = "route-unguarded"
)

// ServeHTTP normalises the request line, checks the headers, then guards
// the requests a route guards and proxies every request to its upstream.
// Only a real protocol upgrade (GET with Upgrade: websocket), the routes
// whose key is off, and the safe methods no route matches pass unguarded:
// any other Upgrade is removed, an Accept header changes nothing, and an
// unsafe request no route matches is refused.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	why := normalise(r)
	if why == "" {
		why = headerAmbiguity(r, g.readHeaders)
	}
	if why != "" {
		refuseAmbiguous(w, why)
		return
	}
	if _, ok := r.Header["Upgrade"]; ok && !websocket(r) {
		// A server may ignore Upgrade (RFC 9110 §7.8); forwarded, it lets
		// an upstream switch the connection to a tunnel past the guard.
		r.Header.Del("Upgrade")
	}
	up := upstreamFor(g.upstreams, r)
	if up == nil {
		writeProblem(w, problemNoUpstream, http.StatusNotFound, "No upstream serves "+r.URL.Path+".")
		return
	}
	rt := routeFor(g.routes, r)
	switch {
	case rt == nil && !safeMethod(r.Method):
		writeProblem(w, problemRouteUnguarded, http.StatusNotFound,
			"No route guards "+r.Method+" "+r.URL.Path+": the gateway forwards no unsafe request it does not guard.")
		return
	case rt == nil || rt.key == keyOff || websocket(r):
		g.open[up].ServeHTTP(w, r)
		return
	case !rt.guards(r):
		rt.proxies[up].ServeHTTP(w, r)
		return
	}
	r.Pattern = rt.pattern.text // the route label of logs and metrics
	s, why := rt.scope.of(r)
	if why != "" {
		refuseAmbiguous(w, why)
		return
	}
	if s != "" {
		r = r.WithContext(idem.WithScope(r.Context(), s))
	}
	rt.guarded.ServeHTTP(w, r)
}

// refuseAmbiguous answers 400 request-ambiguous: nothing is claimed or
// forwarded.
func refuseAmbiguous(w http.ResponseWriter, why string) {
	writeProblem(w, problemRequestAmbiguous, http.StatusBadRequest, "The gateway refuses this request: "+why+".")
}

// guards reports whether rt guards r: its key is required, or optional
// and r has one.
func (rt *route) guards(r *http.Request) bool {
	switch rt.key {
	case keyRequired:
		return true
	case keyOptional:
		return r.Header.Get(rt.mw.Config().Header) != ""
	}
	return false
}

// safeMethod reports whether a request with method may pass unguarded
// when no route matches it: GET, HEAD and OPTIONS only, so that an
// unknown method is refused too.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// websocket reports whether r is a WebSocket handshake (RFC 6455): a GET
// asking to upgrade the connection to websocket.
func websocket(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// guard is rt's guarded handler: the bounds, then the middleware, then the
// upstream.
func (g *gateway) guard(rt *route) http.Handler {
	forward := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idem.PriorAttemptLapsed(r.Context()) && !rt.dedups {
			// A gateway that held the key died or stalled, maybe after
			// forwarding it: the upstream may have acted.
			g.outcomeUnknown(w, r, causeAttemptLapsed, "an earlier attempt was cut off",
				"An earlier attempt with this key was cut off, maybe after it reached the upstream: it may or may not have taken effect. ")
			return
		}
		rt.proxies[upstreamFor(g.upstreams, r)].ServeHTTP(w, r)
	})
	return g.limiter.Wrap(rt.mw.Require(forward), rt.mw.Config())
}

// newProxy returns a reverse proxy to up; timeout, when positive, bounds
// the wait for the response headers. A guarded request is forwarded with
// a key derived from its own.
func (g *gateway) newProxy(up *upstream, transport http.RoundTripper, dedups bool) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up.url)
			pr.Out.Host = pr.In.Host
			if key := idem.KeyFromContext(pr.In.Context()); key != "" {
				pr.Out.Header.Set("Idempotency-Key", derivedKey(idem.ScopeFromContext(pr.In.Context()), key))
			} else {
				// Unguarded: the client's raw key never reaches the
				// upstream, which might take it for a guarded one's.
				pr.Out.Header.Del("Idempotency-Key")
			}
		},
		Transport:  transport,
		BufferPool: proxyBuffers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.upstreamFailed(w, r, err, dedups)
		},
	}
}

// proxyBuffers lends the proxies the buffers they copy responses through:
// without a pool, httputil.ReverseProxy allocates 32 KiB per response.
var proxyBuffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (bp *bufferPool) Get() []byte  { return *bp.p.Get().(*[]byte) }
func (bp *bufferPool) Put(b []byte) { bp.p.Put(&b) }

// newTransport is the connection pool to the upstreams of the routes with
// one upstream timeout.
func newTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
	}
}

// upstreamFailed answers a request that got no response from the
// upstream. When the connection was never made, nothing was sent: 502,
// not stored, retry. Otherwise the upstream may have acted: unless it
// deduplicates on the forwarded key, the answer is the stored
// outcome-unknown problem, so that no retry runs it a second time.
func (g *gateway) upstreamFailed(w http.ResponseWriter, r *http.Request, err error, dedups bool) {
	var op *net.OpError
	notSent := errors.As(err, &op) && op.Op == "dial"
	switch {
	case idem.KeyFromContext(r.Context()) == "" || notSent || dedups:
		writeProblem(w, problemUpstreamUnavailable, http.StatusBadGateway, "The upstream gave no answer; retry with the same key.")
	default:
		g.outcomeUnknown(w, r, idem.UnknownCause(err), "no answer from the upstream: "+err.Error(),
			"The request reached the upstream and no answer came back: it may or may not have taken effect. ")
	}
}

// outcomeUnknown answers the outcome-unknown problem, which the middleware
// stores: no retry sends the request again. Its cause member says why,
// for the operator and the client. It is logged at WARN: an operator must
// find out what happened (docs/gateway.md, the runbook).
func (g *gateway) outcomeUnknown(w http.ResponseWriter, r *http.Request, cause, reason, what string) {
	var upstream string
	if up := upstreamFor(g.upstreams, r); up != nil {
		upstream = up.name
	}
	g.logger.LogAttrs(r.Context(), slog.LevelWarn, "outcome unknown",
		slog.String("route", r.Pattern), slog.String("scope", idem.ScopeFromContext(r.Context())),
		slog.String("key_hash", keyHash(idem.KeyFromContext(r.Context()))), slog.String("upstream", upstream),
		slog.String("cause", cause), slog.String("reason", reason))
	g.unknown.WithLabelValues(r.Pattern).Inc()
	markUnknown(r)
	writeProblem(w, problemOutcomeUnknown, http.StatusConflict,
		what+"The gateway will not send it again; an operator must find out what happened upstream.", "cause", cause)
}

// writeProblem answers an RFC 9457 problem; members are more of its
// members, as name, value pairs.
func writeProblem(w http.ResponseWriter, name string, status int, detail string, members ...string) {
	p := map[string]any{
		"type": idem.DefaultProblemTypeBase + name, "title": problemTitles[name], "status": status, "detail": detail,
	}
	for i := 0; i+1 < len(members); i += 2 {
		p[members[i]] = members[i+1]
	}
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	// outcome-unknown (409) is final: the gateway will not send it again.
	w.Header().Set(idem.HeaderShouldRetry, idem.ShouldRetryHeader(status))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

var problemTitles = map[string]string{
	problemOutcomeUnknown:      "Outcome unknown",
	problemUpstreamUnavailable: "Upstream unavailable",
	problemNoUpstream:          "No upstream",
	problemRequestAmbiguous:    "Ambiguous request",
	problemRouteUnguarded:      "No route guards this request",
}

// scopeOf is the key space of a scope header's value: its SHA-256, so the
// gateway stores no credential.
func scopeOf(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// keyHash names a key in logs without the key: the first 16 hex digits
// of its SHA-256.
func keyHash(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// derivedKey is the key forwarded upstream: stable across the client's
// retries, distinct per scope, never the client's raw key.
func derivedKey(scope, key string) string {
	sum := sha256.Sum256([]byte("idem-gateway\x00" + scope + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}
