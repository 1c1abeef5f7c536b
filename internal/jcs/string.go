package jcs

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// str parses the string starting at p.pos, appends its canonical form to
// p.out and, when wantName is set, returns its unescaped value so member
// names can be compared and sorted by what they denote, not how they are
// spelled.
func (p *parser) str(wantName bool) (string, error) {
	open := p.pos
	p.pos++
	buf := p.scratch[:0]
	for {
		if p.pos >= len(p.data) {
			return "", &SyntaxError{Offset: open, Msg: "unterminated string"}
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.scratch = buf
			p.out = appendQuoted(p.out, buf)
			if wantName {
				return string(buf), nil
			}
			return "", nil
		case c == '\\':
			var err error
			if buf, err = p.escape(buf, open); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf("unescaped control character %U in string", c)}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			// utf8.DecodeRune also rejects overlong forms and UTF-8-encoded
			// surrogates, which are invalid UTF-8 too.
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", &SyntaxError{Offset: p.pos, Msg: "invalid utf-8"}
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

// escape decodes the escape sequence at p.pos into buf.
func (p *parser) escape(buf []byte, open int) ([]byte, error) {
	esc := p.pos
	if esc+1 >= len(p.data) {
		return nil, &SyntaxError{Offset: open, Msg: "unterminated string"}
	}
	c := p.data[esc+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		// Decoded after the switch: it may need a second escape.
	default:
		r, _ := utf8.DecodeRune(p.data[esc+1:])
		return nil, p.failAt(esc+1, fmt.Sprintf("invalid escape character %q in string", r))
	}
	r, err := p.hex4(open)
	if err != nil {
		return nil, err
	}
	if !utf16.IsSurrogate(r) {
		return utf8.AppendRune(buf, r), nil
	}
	// A surrogate is only meaningful as a high/low pair spelled as two
	// consecutive escapes; anything else has no Unicode scalar value.
	lone := &SyntaxError{Offset: esc, Msg: fmt.Sprintf(`unpaired surrogate \u%04x in string`, r)}
	if r >= 0xDC00 {
		return nil, lone
	}
	if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
		return nil, lone
	}
	p.pos += 2
	lo, err := p.hex4(open)
	if err != nil {
		return nil, err
	}
	if lo < 0xDC00 || lo > 0xDFFF {
		return nil, lone
	}
	return utf8.AppendRune(buf, utf16.DecodeRune(r, lo)), nil
}

// hex4 reads the four hex digits of a \u escape.
func (p *parser) hex4(open int) (rune, error) {
	var r rune
	for range 4 {
		if p.pos >= len(p.data) {
			return 0, &SyntaxError{Offset: open, Msg: "unterminated string"}
		}
		c := p.data[p.pos]
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, p.failAt(p.pos, `invalid hex digit in \u escape`)
		}
		r = r<<4 | rune(v)
		p.pos++
	}
	return r, nil
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s, which is valid UTF-8, as an RFC 8785 §3.2.2.2 string.
// Multi-byte sequences never contain bytes below 0x80, so scanning bytes is
// enough to find everything that needs escaping.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
