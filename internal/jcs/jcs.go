package jcs

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds array/object nesting so that the recursive-descent parser
// fails with an error rather than exhausting the goroutine stack.
const maxDepth = 1000

// dupMapThreshold is the member count above which duplicate detection
// switches from a linear scan to a map, keeping huge objects O(n).
const dupMapThreshold = 16

// SyntaxError reports why data is not canonicalisable. Its text names no
// package: the idem middleware puts it in its 400's detail, for clients.
type SyntaxError struct {
	Offset int    // byte offset in the input where the problem was detected
	Msg    string // short lower-case reason
}

func (e *SyntaxError) Error() string {
	return e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Canonicalize returns the RFC 8785 canonical form of one JSON text, with the
// exact-decimal number handling described in the package documentation.
// On failure the error is always a *SyntaxError.
func Canonicalize(data []byte) ([]byte, error) {
	p := parser{data: data, out: make([]byte, 0, len(data))}
	p.skipSpace()
	if p.pos == len(data) {
		return nil, &SyntaxError{Offset: p.pos, Msg: "empty input"}
	}
	if err := p.value(); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(data) {
		return nil, p.failAt(p.pos, "trailing data after value")
	}
	return p.out, nil
}

type member struct {
	name       string
	start, end int // the serialised `"name":value` in out, relative to the object body
}

type parser struct {
	data  []byte
	pos   int
	depth int
	out   []byte
	// members is a stack shared by all open objects, so nested objects do not
	// each allocate their own slice.
	members []member
	// scratch holds the unescaped content of the string being parsed.
	scratch []byte
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// failAt builds the error for an unexpected byte at off. Invalid UTF-8 and
// end of input take precedence over msg because they are the real cause.
func (p *parser) failAt(off int, msg string) *SyntaxError {
	switch {
	case off >= len(p.data):
		msg = "unexpected end of input"
	case p.data[off] >= utf8.RuneSelf:
		if r, size := utf8.DecodeRune(p.data[off:]); r == utf8.RuneError && size <= 1 {
			msg = "invalid utf-8"
		}
	}
	return &SyntaxError{Offset: off, Msg: msg}
}

// unexpectedChar reports the character at off, which the grammar forbids there.
func (p *parser) unexpectedChar(off int) *SyntaxError {
	if off >= len(p.data) {
		return p.failAt(off, "")
	}
	r, _ := utf8.DecodeRune(p.data[off:])
	return p.failAt(off, fmt.Sprintf("unexpected character %q", r))
}

func (p *parser) value() error {
	if p.pos >= len(p.data) {
		return p.failAt(p.pos, "")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		_, err := p.str(false)
		return err
	case c == '-' || isDigit(c):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return p.unexpectedChar(p.pos)
	}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &SyntaxError{Offset: p.pos, Msg: "nesting deeper than " + strconv.Itoa(maxDepth) + " levels"}
	}
	return nil
}

func (p *parser) array() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		p.depth--
		return nil
	}
	for {
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			p.out = append(p.out, ',')
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == ']' {
			p.pos++
			p.out = append(p.out, ']')
			p.depth--
			return nil
		}
		return p.failAt(p.pos, "expected ',' or ']' after array element")
	}
}

func (p *parser) object() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++
	p.out = append(p.out, '{')
	body := len(p.out)
	base := len(p.members)
	var seen map[string]struct{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		p.depth--
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.failAt(p.pos, "expected string for member name")
		}
		nameOff := p.pos
		start := len(p.out) - body
		name, err := p.str(true)
		if err != nil {
			return err
		}
		// Checked before parsing the value so the first problem in document
		// order is the one reported.
		if p.isDuplicate(base, &seen, name) {
			return &SyntaxError{Offset: nameOff, Msg: "duplicate member name " + quoteName(name)}
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.failAt(p.pos, "expected ':' after member name")
		}
		p.pos++
		p.out = append(p.out, ':')
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		p.members = append(p.members, member{name: name, start: start, end: len(p.out) - body})
		p.skipSpace()
		if p.pos < len(p.data) && p.data[p.pos] == ',' {
			p.pos++
			p.out = append(p.out, ',')
			continue
		}
		if p.pos < len(p.data) && p.data[p.pos] == '}' {
			p.pos++
			break
		}
		return p.failAt(p.pos, "expected ',' or '}' after object member")
	}
	p.sortMembers(body, p.members[base:])
	p.members = p.members[:base]
	p.out = append(p.out, '}')
	p.depth--
	return nil
}

func (p *parser) isDuplicate(base int, seen *map[string]struct{}, name string) bool {
	ms := p.members[base:]
	if len(ms) < dupMapThreshold {
		for _, m := range ms {
			if m.name == name {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(ms))
		for _, m := range ms {
			(*seen)[m.name] = struct{}{}
		}
	}
	if _, ok := (*seen)[name]; ok {
		return true
	}
	(*seen)[name] = struct{}{}
	return false
}

// sortMembers reorders the already serialised members in out[body:] into
// RFC 8785 order. Nested values were canonicalised in place, so moving their
// bytes around is all that is left to do.
func (p *parser) sortMembers(body int, ms []member) {
	cmp := func(a, b member) int { return compareUTF16(a.name, b.name) }
	if slices.IsSortedFunc(ms, cmp) {
		return
	}
	old := bytes.Clone(p.out[body:])
	slices.SortFunc(ms, cmp)
	p.out = p.out[:body]
	for i, m := range ms {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, old[m.start:m.end]...)
	}
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 §3.2.3
// requires. This differs from byte (code point) order only when a character
// in U+E000–U+FFFF meets a supplementary character, whose leading high
// surrogate (U+D800–U+DBFF) sorts before it.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := leadUnit(ra), leadUnit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Same high surrogate: low surrogates order like the code points.
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func leadUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

func (p *parser) literal(word string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(word)) {
		return p.failAt(p.pos, "invalid literal")
	}
	p.pos += len(word)
	p.out = append(p.out, word...)
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (p *parser) skipDigits() {
	for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
		p.pos++
	}
}

// number validates the RFC 8259 number grammar; the literal is then handed
// to appendNumber, which relies on that validation.
func (p *parser) number() error {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
		if p.pos < len(p.data) && isDigit(p.data[p.pos]) {
			return &SyntaxError{Offset: p.pos - 1, Msg: "leading zero in number"}
		}
	case p.pos < len(p.data) && isDigit(p.data[p.pos]):
		p.skipDigits()
	default:
		return p.numberErr("missing digits after minus sign")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.pos >= len(p.data) || !isDigit(p.data[p.pos]) {
			return p.numberErr("missing digits after decimal point")
		}
		p.skipDigits()
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(p.data) || !isDigit(p.data[p.pos]) {
			return p.numberErr("missing digits in exponent")
		}
		p.skipDigits()
	}
	p.out = appendNumber(p.out, p.data[start:p.pos])
	return nil
}

// numberErr keeps the precise reason even at end of input, where failAt
// would otherwise say only "unexpected end of input".
func (p *parser) numberErr(msg string) error {
	if p.pos >= len(p.data) {
		return &SyntaxError{Offset: p.pos, Msg: msg}
	}
	return p.failAt(p.pos, msg)
}

// maxQuoted is how many bytes of a member name an error repeats: a name is
// the client's input, as long as the body.
const maxQuoted = 64

// quoteName quotes name for an error, cut to maxQuoted bytes, saying so.
func quoteName(name string) string {
	if len(name) <= maxQuoted {
		return strconv.Quote(name)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes, cut)", strconv.Quote(name[:n]), len(name))
}
