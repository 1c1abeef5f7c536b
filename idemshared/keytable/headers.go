package keytable

import (
	"encoding/json"
	"slices"
	"strings"
)

// EncodeHeaders is the response_headers parameter of a completion: the
// headers as a JSON object of arrays, keys sorted, as json.Marshal
// writes them. Headers of plain ASCII, what a response almost always
// has, are written without reflection, in one allocation.
func EncodeHeaders(h map[string][]string) string {
	if h == nil {
		return "null"
	}
	var stack [8]string
	names := stack[:0]
	n := 2
	for name, values := range h {
		if !plain(name) {
			return marshalHeaders(h)
		}
		names = append(names, name)
		n += len(name) + 5
		for _, v := range values {
			if !plain(v) {
				return marshalHeaders(h)
			}
			n += len(v) + 3
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(name)
		b.WriteString(`":`)
		values := h[name]
		if values == nil {
			b.WriteString("null")
			continue
		}
		b.WriteByte('[')
		for j, v := range values {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.WriteString(v)
			b.WriteByte('"')
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.String()
}

// plain reports whether s is written into JSON as it is, with nothing to
// escape: visible ASCII and spaces but '"', '\' and what json.Marshal
// escapes for HTML ('<', '>', '&').
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func marshalHeaders(h map[string][]string) string {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err) // a map of string slices always encodes
	}
	return string(b)
}
