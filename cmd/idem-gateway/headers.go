package main

import (
	"net/http"
	"strings"
)

// methodOverrides are the headers whose value some frameworks run a
// request as (Rack::MethodOverride, Express's method-override, ASP.NET's
// HttpMethodOverride), in Go's canonical spelling.
var methodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// headerAmbiguity returns why r's headers cannot be forwarded safely (""
// when they can): a header an upstream reads as one of names (the key and
// scope headers, in Go's canonical spelling) under another spelling, such
// a header as a trailer, or a method override naming another method than
// r's. docs/gateway.md has the table. It allocates nothing when the
// headers are safe.
func headerAmbiguity(r *http.Request, names []string) string {
	for name, vs := range r.Header {
		for _, n := range names {
			if name != n && sameVariable(name, n) {
				return "the header " + quote(name) + " is " + n + " to a CGI, WSGI or Rack upstream"
			}
		}
		for _, m := range methodOverrides {
			if !sameVariable(name, m) {
				continue
			}
			for _, v := range vs {
				if !strings.EqualFold(strings.TrimSpace(v), r.Method) {
					return "the header " + quote(name) + " asks the upstream to run this " + r.Method + " as " + quote(v)
				}
			}
		}
	}
	for name := range r.Trailer {
		for _, n := range names {
			if sameVariable(name, n) {
				return "the trailer " + quote(name) + " would reach the upstream after the gateway read the headers"
			}
		}
	}
	return ""
}

// sameVariable reports whether header names a and b are one variable to a
// CGI, WSGI or Rack server (HTTP_IDEMPOTENCY_KEY): case ignored, _ read
// as -.
func sameVariable(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if variableByte(a[i]) != variableByte(b[i]) {
			return false
		}
	}
	return true
}

func variableByte(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c - 'A' + 'a'
	}
	return c
}
