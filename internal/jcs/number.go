package jcs

import (
	"bytes"
	"strconv"
)

// maxSmallExpDigits bounds the exponent literals handled with int64
// arithmetic. The grammar allows exponents of any length; longer ones are
// kept as decimal digit strings, because math/big's decimal conversion is
// superlinear and a multi-megabyte exponent would then cost seconds of CPU.
const maxSmallExpDigits = 15

// decimal is the exact value of a number literal as ±0.digits × 10^e, with
// the decimal point position e = n, or e = n ± hugeExp when the literal's
// exponent was too long for int64.
type decimal struct {
	neg        bool
	digits     []byte // significant digits, no leading or trailing zeros; empty for zero
	n          int64
	hugeExp    []byte // exponent digits without leading zeros, or nil
	hugeExpNeg bool
}

// parseDecimal decomposes a literal that already matched the RFC 8259
// number grammar, so it does no validation of its own.
func parseDecimal(lit []byte) decimal {
	var d decimal
	i := 0
	if lit[0] == '-' {
		d.neg = true
		i++
	}
	intStart := i
	for i < len(lit) && isDigit(lit[i]) {
		i++
	}
	intPart := lit[intStart:i]
	var frac []byte
	if i < len(lit) && lit[i] == '.' {
		i++
		fracStart := i
		for i < len(lit) && isDigit(lit[i]) {
			i++
		}
		frac = lit[fracStart:i]
	}
	expNeg := false
	var exp []byte
	if i < len(lit) {
		i++ // 'e' or 'E'
		if lit[i] == '+' || lit[i] == '-' {
			expNeg = lit[i] == '-'
			i++
		}
		exp = bytes.TrimLeft(lit[i:], "0")
	}

	digits := make([]byte, 0, len(intPart)+len(frac))
	digits = append(append(digits, intPart...), frac...)
	lead := len(digits)
	digits = bytes.TrimLeft(digits, "0")
	lead -= len(digits)
	digits = bytes.TrimRight(digits, "0")
	if len(digits) == 0 {
		return decimal{} // every zero, including -0 and 0e999, is plain 0
	}
	d.digits = digits
	shift := int64(len(intPart)) - int64(lead)

	if len(exp) > maxSmallExpDigits {
		d.n, d.hugeExp, d.hugeExpNeg = shift, exp, expNeg
		return d
	}
	var e int64
	for _, c := range exp {
		e = e*10 + int64(c-'0')
	}
	if expNeg {
		e = -e
	}
	d.n = shift + e
	return d
}

// appendNumber appends the canonical form of a grammar-checked number
// literal: the RFC 8785 form when the double represents the literal exactly
// in shortest form, otherwise the literal's exact decimal value (see the
// package documentation). Whenever the first applies the second would print
// the same bytes, so the output always denotes exactly what was written.
func appendNumber(dst, lit []byte) []byte {
	d := parseDecimal(lit)
	if len(d.digits) == 0 {
		return append(dst, '0')
	}
	if d.hugeExp != nil {
		return d.appendTo(dst) // far outside float64 range either way
	}
	// ParseFloat fails only with ErrRange here (overflow to ±Inf). Underflow
	// returns 0 without error and is caught by the digit comparison below.
	if f, err := strconv.ParseFloat(string(lit), 64); err == nil {
		var buf [32]byte
		digits, n := shortest(buf[:0], f)
		if n == d.n && bytes.Equal(digits, d.digits) {
			return appendFloat(dst, f)
		}
	}
	return d.appendTo(dst)
}

// appendFloat appends f as ECMAScript Number.prototype.toString would, which
// is RFC 8785 §3.2.2.3. f must be finite: JSON has no spelling for NaN or
// infinities and appendNumber never passes them.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // both +0 and -0
	}
	var buf [32]byte
	digits, n := shortest(buf[:0], f)
	return appendES(dst, f < 0, digits, n)
}

// shortest returns the shortest digits that round-trip to f and the decimal
// point position n, so |f| = 0.digits × 10^n.
func shortest(buf []byte, f float64) ([]byte, int64) {
	// 'e' format is "-d.ddde±xx": one digit before the point, so n = xx+1.
	s := strconv.AppendFloat(buf, f, 'e', -1, 64)
	if s[0] == '-' {
		s = s[1:]
	}
	e := bytes.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(string(s[e+1:]))
	digits := s[:e]
	if len(digits) > 1 {
		// Drop the '.' in place; the remaining bytes stay in buf.
		digits = append(digits[:1], digits[2:]...)
	}
	return digits, int64(exp) + 1
}

// appendES lays out ±0.digits × 10^n with the rules of ECMA-262
// Number::toString, where k is the digit count and n the point position.
func appendES(dst []byte, neg bool, digits []byte, n int64) []byte {
	if neg {
		dst = append(dst, '-')
	}
	k := int64(len(digits))
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		return appendZeros(dst, n-k)
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		return append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		dst = appendZeros(dst, -n)
		return append(dst, digits...)
	}
	dst = appendMantissa(dst, digits)
	if n-1 >= 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, n-1, 10)
}

// appendMantissa writes d[.ddd]e, the part of exponent notation before the
// signed exponent.
func appendMantissa(dst, digits []byte) []byte {
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	return append(dst, 'e')
}

func appendZeros(dst []byte, count int64) []byte {
	for ; count > 0; count-- {
		dst = append(dst, '0')
	}
	return dst
}

func (d decimal) appendTo(dst []byte) []byte {
	if d.hugeExp == nil {
		return appendES(dst, d.neg, d.digits, d.n)
	}
	// |hugeExp| >= 10^15 dwarfs both the (-6, 21] plain-notation window and
	// d.n, which is bounded by the literal's length, so only exponent
	// notation applies and the printed exponent keeps hugeExp's sign.
	if d.neg {
		dst = append(dst, '-')
	}
	dst = appendMantissa(dst, d.digits)
	if d.hugeExpNeg {
		dst = append(dst, '-')
	} else {
		dst = append(dst, '+')
	}
	// Printed exponent is n-1 = ±hugeExp + (d.n-1); adding a same-signed
	// offset grows the magnitude, an opposite-signed one shrinks it.
	delta := d.n - 1
	if d.hugeExpNeg {
		delta = -delta
	}
	if delta >= 0 {
		return appendAddDecimal(dst, d.hugeExp, uint64(delta))
	}
	return appendSubDecimal(dst, d.hugeExp, uint64(-delta))
}

// appendAddDecimal appends the decimal digits of mag + x, where mag is a
// decimal magnitude without leading zeros.
func appendAddDecimal(dst, mag []byte, x uint64) []byte {
	// A uint64 has at most 20 digits, so this leaves room for every carry.
	out := bytes.Repeat([]byte{'0'}, max(len(mag), 20)+1)
	copy(out[len(out)-len(mag):], mag)
	for i := len(out) - 1; x > 0; i-- {
		v := uint64(out[i]-'0') + x
		out[i] = byte('0' + v%10)
		x = v / 10
	}
	return append(dst, bytes.TrimLeft(out, "0")...)
}

// appendSubDecimal appends the decimal digits of mag - x, where mag is a
// decimal magnitude without leading zeros and larger than x.
func appendSubDecimal(dst, mag []byte, x uint64) []byte {
	out := bytes.Clone(mag)
	for i := len(out) - 1; x > 0; i-- {
		take := byte(x % 10)
		x /= 10
		digit := out[i] - '0'
		if digit < take {
			digit += 10
			x++ // borrow from the next digit up
		}
		out[i] = '0' + digit - take
	}
	return append(dst, bytes.TrimLeft(out, "0")...)
}
