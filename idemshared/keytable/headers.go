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

// DecodeHeaders reads stored headers (EncodeHeaders' JSON, or the same as
// PostgreSQL's jsonb prints it) as json.Unmarshal would. Headers of plain
// ASCII are read without reflection: one string holds every name and
// value, one array every value; anything else goes to json.Unmarshal.
func DecodeHeaders(b []byte) (map[string][]string, error) {
	if h, ok := decodePlain(b); ok {
		return h, nil
	}
	var h map[string][]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// decodePlain reads an object of arrays of strings with nothing escaped
// and nothing but printable ASCII in them; ok is false for anything else.
func decodePlain(b []byte) (h map[string][]string, ok bool) {
	quotes := 0
	for _, c := range b {
		switch {
		case c == '"':
			quotes++
		case c == '\\' || c >= 0x80:
			return nil, false
		}
	}
	d := plainDecoder{s: string(b), values: make([]string, 0, quotes/2)}
	d.space()
	if d.literal("null") {
		d.space()
		return nil, d.i == len(d.s)
	}
	if !d.byte('{') {
		return nil, false
	}
	h = make(map[string][]string, quotes/4)
	ok = d.list('}', func() bool {
		name, ok := d.str()
		if !ok {
			return false
		}
		d.space()
		if !d.byte(':') {
			return false
		}
		d.space()
		h[name], ok = d.array()
		return ok
	})
	if !ok {
		return nil, false
	}
	d.space()
	return h, d.i == len(d.s)
}

// plainDecoder is decodePlain's position in s, and the array every value
// is appended to.
type plainDecoder struct {
	s      string
	i      int
	values []string
}

// space skips JSON's white space.
func (d *plainDecoder) space() {
	for d.i < len(d.s) && (d.s[d.i] == ' ' || d.s[d.i] == '\t' || d.s[d.i] == '\n' || d.s[d.i] == '\r') {
		d.i++
	}
}

// list reads the items of an object or an array up to its end: item
// reads one; commas go between them.
func (d *plainDecoder) list(end byte, item func() bool) bool {
	for first := true; ; first = false {
		d.space()
		if d.byte(end) {
			return true
		}
		if !first {
			if !d.byte(',') {
				return false
			}
			d.space()
		}
		if !item() {
			return false
		}
	}
}

func (d *plainDecoder) byte(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *plainDecoder) literal(l string) bool {
	if strings.HasPrefix(d.s[d.i:], l) {
		d.i += len(l)
		return true
	}
	return false
}

// str reads a string with no control character in it (decodePlain has
// ruled out escapes and non-ASCII).
func (d *plainDecoder) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	for ; d.i < len(d.s) && d.s[d.i] != '"'; d.i++ {
		if d.s[d.i] < 0x20 {
			return "", false
		}
	}
	if d.i == len(d.s) {
		return "", false
	}
	d.i++
	return d.s[start : d.i-1], true
}

// array reads null or an array of strings, its values appended to
// d.values and capped there, so that an append to one header's values
// never reaches the next one's.
func (d *plainDecoder) array() ([]string, bool) {
	if d.literal("null") {
		return nil, true
	}
	if !d.byte('[') {
		return nil, false
	}
	start := len(d.values)
	ok := d.list(']', func() bool {
		v, ok := d.str()
		if ok {
			d.values = append(d.values, v)
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	end := len(d.values)
	return d.values[start:end:end], true
}
