package main

import (
	"net/http"
	"net/url"
	"strings"
)

// normalise decides the request line once, before any route or upstream
// is chosen: the method must be upper-case, and the path is rewritten to
// its one normal spelling, which the gateway then matches, fingerprints
// and forwards. It returns why a request cannot be normalised safely
// ("" when it can). docs/gateway.md has the table of spellings.
func normalise(r *http.Request) string {
	for i := 0; i < len(r.Method); i++ {
		if c := r.Method[i]; 'a' <= c && c <= 'z' {
			return "the method " + quote(r.Method) + " is not upper-case: methods are case-sensitive, and upstreams differ on whether it is " + strings.ToUpper(r.Method)
		}
	}
	r.URL.ForceQuery = false // "/pay?" is "/pay"
	raw := requestPath(r)
	if !strings.HasPrefix(raw, "/") {
		return "the path " + quote(raw) + " does not begin with /"
	}
	if !needsNormalising(raw) {
		return ""
	}
	norm, why := normalPath(raw)
	if why != "" {
		return why
	}
	p, _ := url.PathUnescape(norm) // normalPath checked every escape
	r.URL.Path, r.URL.RawPath = p, norm
	return ""
}

// requestPath is the path of the request line as the client spelt it.
func requestPath(r *http.Request) string {
	raw, _, _ := strings.Cut(r.RequestURI, "?")
	if raw == "" {
		return r.URL.EscapedPath() // a request made in-process
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok && !strings.Contains(scheme, "/") {
		// The absolute form, http://host/path: the path follows the
		// authority.
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i:]
		}
		return "/"
	}
	return raw
}

// needsNormalising reports whether raw may differ from its normal form:
// the hot path's check, which allocates nothing.
func needsNormalising(raw string) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '%', c == ';', c == '\\', c < 0x20, c == 0x7f:
			return true
		case c == '/' && i+1 < len(raw) && (raw[i+1] == '/' || raw[i+1] == '.'):
			return true
		}
	}
	return false
}

// normalPath is raw's normal form: repeated slashes merged, the dot
// segments removed (RFC 3986 §5.2.4), unreserved characters decoded and
// the other escapes' hex upper-cased. A spelling upstreams read in
// different ways is refused, with the reason: an encoded slash, backslash,
// percent or semicolon, an encoded dot segment, a path parameter, a
// control byte, a path that climbs above the root.
func normalPath(raw string) (string, string) {
	segs := make([]string, 0, 8)
	trailing := false
	for _, seg := range strings.Split(raw[1:], "/") {
		dec, encoded, why := decodeSegment(seg)
		if why != "" {
			return "", "the path " + quote(raw) + " has " + why
		}
		trailing = false
		switch dec {
		case "", ".", "..":
			if encoded {
				return "", "the path " + quote(raw) + " has an encoded dot segment"
			}
			trailing = true
			if dec == ".." {
				if len(segs) == 0 {
					return "", "the path " + quote(raw) + " climbs above the root"
				}
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, dec)
		}
	}
	p := "/" + strings.Join(segs, "/")
	if trailing && len(segs) > 0 {
		p += "/"
	}
	return p, ""
}

// decodeSegment decodes the unreserved characters of one path segment;
// encoded reports whether it had any escape.
func decodeSegment(seg string) (dec string, encoded bool, why string) {
	if strings.IndexByte(seg, '%') < 0 {
		if strings.IndexByte(seg, ';') >= 0 {
			return "", false, "a path parameter (;)"
		}
		if why := badByte(seg); why != "" {
			return "", false, why
		}
		return seg, false, ""
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c != '%' {
			if c == ';' {
				return "", true, "a path parameter (;)"
			}
			if why := badByte(seg[i : i+1]); why != "" {
				return "", true, why
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
			return "", true, "an invalid percent-encoding"
		}
		d := unhex(seg[i+1])<<4 | unhex(seg[i+2])
		switch {
		case d == '/', d == '\\':
			return "", true, "an encoded slash or backslash"
		case d == '%':
			return "", true, "an encoded percent sign"
		case d == ';':
			return "", true, "an encoded semicolon"
		case d < 0x20, d == 0x7f:
			return "", true, "an encoded control byte"
		case unreserved(d):
			b.WriteByte(d)
		default:
			b.WriteString(strings.ToUpper(seg[i : i+3]))
		}
		i += 2
	}
	return b.String(), true, ""
}

func badByte(s string) string {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			return "a backslash"
		case c < 0x20, c == 0x7f:
			return "a control byte"
		}
	}
	return ""
}

// unreserved reports whether c is one of RFC 3986's unreserved characters,
// which mean the same encoded or not.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// quote is s for a problem's detail, cut to 128 bytes.
func quote(s string) string {
	if len(s) > 128 {
		s = s[:128] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
