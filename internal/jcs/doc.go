// Package jcs produces the RFC 8785 JSON Canonicalization Scheme (JCS) form
// of a JSON text, so that idempotent payment requests whose bodies differ only
// in insignificant ways (whitespace, member order, escape spelling, number
// spelling such as 1.0 versus 1) fingerprint to the same bytes.
//
// Canonicalize parses with its own strict parser instead of encoding/json,
// because encoding/json silently repairs invalid UTF-8 and lone surrogates and
// keeps the last of duplicate member names. Any of those would let two
// different byte streams that a downstream service may interpret differently
// share one fingerprint, so they are rejected with a *SyntaxError instead.
//
// # Input rules
//
// The input must be exactly one JSON text per RFC 8259 with optional
// surrounding whitespace, and additionally:
//
//   - valid UTF-8 everywhere;
//   - no \u escape that decodes to an unpaired UTF-16 surrogate;
//   - no two members of one object whose names are equal after unescaping;
//   - at most 1000 levels of array/object nesting, so hostile input
//     cannot exhaust the stack.
//
// Unicode noncharacters (for example U+FFFE), which I-JSON discourages, are
// accepted: they are valid UTF-8 and hash unambiguously.
//
// # Output
//
// Output follows RFC 8785 §3.2: no whitespace; object members sorted by
// their names compared as UTF-16 code unit sequences; strings escape only
// '"', '\\' and U+0000–U+001F (using \b \t \n \f \r where they exist and
// lower-case \u00xx otherwise), and everything else, including U+2028,
// U+2029 and HTML-sensitive characters, is written as raw UTF-8.
//
// # Departure from RFC 8785: numbers never lose precision
//
// RFC 8785 serialises a number by converting it to an IEEE 754 double and
// printing that with ECMAScript's Number.prototype.toString. For a payment
// fingerprint that is dangerous: 9007199254740993 and 9007199254740992 are
// the same double, so two different amounts would share one fingerprint, and
// 1e400 cannot be represented at all.
//
// This package therefore prints a number in the RFC 8785 way only when the
// literal's exact decimal value is the value of the double's shortest
// round-trip representation. Otherwise (precision lost, overflow to infinity,
// or underflow to zero) it prints the literal's own exact decimal value,
// normalised to its significant digits and laid out with the same ECMAScript
// rules (plain notation for decimal exponents in (-6, 21], otherwise
// d.ddde±x), with -0 printed as 0. Examples:
//
//	1.0, 1, 1e0, 10e-1         -> 1
//	9007199254740993           -> 9007199254740993   (RFC 8785: 9007199254740992)
//	0.30000000000000000001     -> 0.30000000000000000001
//	333333333.33333329         -> 333333333.33333329 (RFC 8785: 333333333.3333333)
//	1e400                      -> 1e+400             (RFC 8785: error)
//	1e-400                     -> 1e-400             (RFC 8785: 0)
//
// Consequently the output for a number always denotes exactly the value the
// client wrote, so distinct amounts never collide, while every input that is
// exactly representable in the RFC 8785 sense canonicalises byte-for-byte as
// RFC 8785 prescribes. Implementations that verify these fingerprints with a
// stock RFC 8785 library will disagree only on numbers that such a library
// would have silently rounded.
package jcs
