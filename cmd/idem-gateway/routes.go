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

// match reports whether p matches a request with method and (normal)
// path: loose ignoring the path's ASCII case and a trailing slash, exact
// as spelt. A guard matches loosely, so that no spelling an upstream
// might take for its path passes unguarded; an exemption from the guard
// (key off, or optional without a key) only as spelt.
func (p pattern) match(method, path string) (loose, exact bool) {
	if p.method != "" && method != p.method {
		return false, false
	}
	if p.prefix {
		exact = strings.HasPrefix(path, p.path)
		return exact || prefixFold(path, p.path), exact
	}
	exact = path == p.path
	return exact || strings.EqualFold(strings.TrimSuffix(path, "/"), strings.TrimSuffix(p.path, "/")), exact
}

// prefixFold reports whether path starts with prefix, ignoring ASCII case,
// or is prefix without its trailing slash.
func prefixFold(path, prefix string) bool {
	if len(path) >= len(prefix) {
		return strings.EqualFold(path[:len(prefix)], prefix)
	}
	return len(path) == len(prefix)-1 && strings.HasSuffix(prefix, "/") && strings.EqualFold(path, prefix[:len(path)])
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
	path := func(p pattern) string {
		if p.prefix {
			return p.path
		}
		return strings.TrimSuffix(p.path, "/")
	}
	return strings.EqualFold(path(p), path(q)) && p.prefix == q.prefix && p.method == q.method
}

// routeFor returns the most specific route that matches r, or nil: a
// route that guards r matched loosely, one that lets it pass unguarded
// only as spelt.
func routeFor(routes []*route, r *http.Request) *route {
	var best *route
	for _, rt := range routes {
		loose, exact := rt.pattern.match(r.Method, r.URL.Path)
		if loose && (exact || rt.guards(r)) && (best == nil || rt.pattern.moreSpecific(best.pattern)) {
			best = rt
		}
	}
	return best
}

// upstreamFor returns the upstream whose prefix is the longest that r's
// path starts with, ignoring ASCII case, or nil.
func upstreamFor(ups []*upstream, r *http.Request) *upstream {
	var best *upstream
	for _, u := range ups {
		if (strings.HasPrefix(r.URL.Path, u.prefix) || prefixFold(r.URL.Path, u.prefix)) && (best == nil || len(u.prefix) > len(best.prefix)) {
			best = u
		}
	}
	return best
}

// unguardedRoute is what passes the gateway unguarded, and why: the
// start-up log lists each.
type unguardedRoute struct{ route, why string }

func (g *gateway) unguarded() []unguardedRoute {
	var us []unguardedRoute
	catchAll := false
	for _, rt := range g.routes {
		switch {
		case rt.key == keyOff && rt.pattern.method == "" && rt.pattern.prefix && rt.pattern.path == "/":
			catchAll = true
			us = append(us, unguardedRoute{rt.pattern.text, "key off, a catch-all: every request no other route matches, any method"})
		case rt.key == keyOff:
			us = append(us, unguardedRoute{rt.pattern.text, "key off"})
		case rt.key == keyOptional:
			us = append(us, unguardedRoute{rt.pattern.text, "key optional: a request without a key"})
		}
	}
	if !catchAll {
		us = append(us, unguardedRoute{"GET, HEAD, OPTIONS", "safe methods no route matches (any other method no route matches is refused)"})
	}
	return append(us, unguardedRoute{"GET with Upgrade: websocket", "a protocol upgrade"})
}
