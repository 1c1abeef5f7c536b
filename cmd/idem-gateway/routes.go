package main

import (
	"fmt"
	"net/http"
	"strings"
)

// keyMode is what a route does with the Idempotency-Key.
type keyMode string

const (
	keyRequired keyMode = "required" // a request without a key is refused (400 key-missing)
	keyOptional keyMode = "optional" // guarded with a key; without one, proxied as is
	keyOff      keyMode = "off"      // never guarded: proxied as is
)

// pattern is a route's "METHOD /path": an exact path, or a path prefix
// when it ends in '*'; the method "*" (or none) matches any method.
type pattern struct {
	text   string // as configured: the route's name in logs and metrics
	method string // "" for any
	path   string
	prefix bool
}

func parsePattern(s string) (pattern, error) {
	s = strings.TrimSpace(s)
	method, path, ok := strings.Cut(s, " ")
	if !ok {
		method, path = "", s
	}
	path = strings.TrimSpace(path)
	if !strings.HasPrefix(path, "/") {
		return pattern{}, fmt.Errorf("%q: want 'METHOD /path', the path ending in * for a prefix", s)
	}
	p := pattern{text: s, method: strings.ToUpper(method), path: path}
	if p.method == "*" {
		p.method = ""
	}
	if strings.HasSuffix(path, "*") {
		p.path, p.prefix = strings.TrimSuffix(path, "*"), true
	}
	if strings.Contains(p.path, "*") {
		return pattern{}, fmt.Errorf("%q: '*' may only end the path", s)
	}
	return p, nil
}

func (p pattern) match(r *http.Request) bool {
	if p.method != "" && r.Method != p.method {
		return false
	}
	if p.prefix {
		return strings.HasPrefix(r.URL.Path, p.path)
	}
	return r.URL.Path == p.path
}

// moreSpecific reports whether p wins over q when both match a request:
// an exact path over a prefix, a longer prefix over a shorter one, a
// method over any method.
func (p pattern) moreSpecific(q pattern) bool {
	if p.prefix != q.prefix {
		return !p.prefix
	}
	if len(p.path) != len(q.path) {
		return len(p.path) > len(q.path)
	}
	return p.method != "" && q.method == ""
}

// sameSpecificity reports whether p and q could match one request with
// neither more specific: an ambiguous configuration.
func (p pattern) sameSpecificity(q pattern) bool {
	return p.path == q.path && p.prefix == q.prefix && p.method == q.method
}

// routeFor returns the most specific route that matches r, or nil.
func routeFor(routes []*route, r *http.Request) *route {
	var best *route
	for _, rt := range routes {
		if rt.pattern.match(r) && (best == nil || rt.pattern.moreSpecific(best.pattern)) {
			best = rt
		}
	}
	return best
}

// upstreamFor returns the upstream whose prefix is the longest that r's
// path starts with, or nil.
func upstreamFor(ups []*upstream, r *http.Request) *upstream {
	var best *upstream
	for _, u := range ups {
		if strings.HasPrefix(r.URL.Path, u.prefix) && (best == nil || len(u.prefix) > len(best.prefix)) {
			best = u
		}
	}
	return best
}
