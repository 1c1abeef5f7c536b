package jcs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"TopLevelString", `"x"`, `"x"`},
		{"TopLevelNumber", ` 1.50 `, `1.5`},
		{"TopLevelLiteral", `null`, `null`},
		{"Literals", `[ true , false , null ]`, `[true,false,null]`},
		{"AllWhitespaceKinds", " \t\n\r[ 1 ,\n2 ]\r\n", `[1,2]`},
		{"EmptyContainers", `[ { } , [ ] , "" ]`, `[{},[],""]`},
		{"SortsMembers", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"SortsNestedMembers", `{"b":{"d":1,"c":2},"a":[{"z":1,"y":{"q":0,"p":0}}]}`, `{"a":[{"y":{"p":0,"q":0},"z":1}],"b":{"c":2,"d":1}}`},
		{"PrefixSortsFirst", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{"EmptyNameSortsFirst", `{"a":1,"":2}`, `{"":2,"a":1}`},
		{"SortsByUnescapedName", `{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{"EuroBeforeEmoji", `{"\ud83d\ude00":1,"\u20ac":2}`, `{"€":2,"😀":1}`},
		{"EmojiBeforePresentationForm", `{"\ufb33":1,"\ud83d\ude00":2}`, "{\"😀\":2,\"\ufb33\":1}"},
		{"SimpleEscapes", `"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
		{"ControlEscapesLowerHex", `"\u0000\u001F\u000B\u001b"`, `"\u0000\u001f\u000b\u001b"`},
		{"NulInName", `{"\u0000":1}`, `{"\u0000":1}`},
		{"UnicodeEscapesBecomeRaw", `"\u0041\u00e9\u20AC"`, `"Aé€"`},
		{"SurrogatePairBecomesRaw", `"\uD83D\uDE00"`, `"😀"`},
		{"LineSeparatorsRaw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"HTMLCharactersRaw", `"\u003c\u003e\u0026<>&"`, `"<>&<>&"`},
		{"DeleteRaw", `"\u007f"`, "\"\x7f\""},
		{"RawNonASCIIKept", `"héllo wörld 😀"`, `"héllo wörld 😀"`},
		{"NoncharacterAccepted", `"\ufffe"`, "\"\ufffe\""},
		{"ReplacementCharacterAccepted", "\"\uFFFD\"", "\"\uFFFD\""},
		{"ManyMembersSorted", manyMembers(40, false), manyMembersSorted(40)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, mustCanonicalize(t, tc.in))
		})
	}
}

// TestCanonicalizeRFCExample uses the input of RFC 8785 §3.2.2. The only
// difference from the RFC's output is 333333333.33333329, which this package
// deliberately keeps exact instead of rounding to 333333333.3333333.
func TestCanonicalizeRFCExample(t *testing.T) {
	t.Parallel()
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	rfcOut := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	want := strings.Replace(rfcOut, "333333333.3333333,", "333333333.33333329,", 1)

	t.Run("ExactDecimalDeparture", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, want, mustCanonicalize(t, in))
	})
	t.Run("RFCOutputIsFixedPoint", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, rfcOut, mustCanonicalize(t, rfcOut))
	})
	t.Run("RoundTrippableNumbersMatchRFC", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, rfcOut, mustCanonicalize(t, strings.Replace(in, "333333333.33333329", "333333333.3333333", 1)))
	})
}

// TestCanonicalizeRFCSorting is the RFC 8785 §3.2.3 example.
func TestCanonicalizeRFCSorting(t *testing.T) {
	t.Parallel()
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control",` +
		`"ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign",` +
		`"😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	require.Equal(t, want, mustCanonicalize(t, in))
}

func TestCanonicalizeEquivalentBodies(t *testing.T) {
	t.Parallel()
	a := mustCanonicalize(t, `{"b":1,"a":"é"}`)
	b := mustCanonicalize(t, `{ "a": "\u00e9", "b": 1.0 }`)
	require.Equal(t, a, b)
	require.Equal(t, `{"a":"é","b":1}`, a)
}

func TestCanonicalizeRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		off      int
		msg      string
	}{
		{"Empty", "", 0, "empty input"},
		{"WhitespaceOnly", " \n\t", 3, "empty input"},
		{"TrailingValue", `1 2`, 2, "trailing data after value"},
		{"TrailingGarbage", `{} x`, 3, "trailing data after value"},
		{"TrailingComment", `{}//`, 2, "trailing data after value"},
		{"HexNumber", `0x10`, 1, "trailing data after value"},
		{"InvalidUTF8InString", "\"a\xffb\"", 2, "invalid utf-8"},
		{"InvalidUTF8InName", "{\"\xfe\":1}", 2, "invalid utf-8"},
		{"InvalidUTF8OutsideString", "[1,\xff]", 3, "invalid utf-8"},
		{"InvalidUTF8AfterValue", "1 \xc3", 2, "invalid utf-8"},
		{"TruncatedUTF8", "\"\xe2\x82\"", 1, "invalid utf-8"},
		{"OverlongUTF8", "\"\xc0\xaf\"", 1, "invalid utf-8"},
		{"UTF8EncodedSurrogate", "\"\xed\xa0\x80\"", 1, "invalid utf-8"},
		{"ByteOrderMark", "\xef\xbb\xbf{}", 0, `unexpected character '\ufeff'`},
		{"LoneHighSurrogate", `"\ud800"`, 1, `unpaired surrogate \ud800 in string`},
		{"HighSurrogateThenText", `["a\uD83Dx"]`, 3, `unpaired surrogate \ud83d in string`},
		{"HighSurrogateThenBMPEscape", `"\ud800\u0041"`, 1, `unpaired surrogate \ud800 in string`},
		{"HighSurrogateTwice", `"\ud800\ud800"`, 1, `unpaired surrogate \ud800 in string`},
		{"HighSurrogateThenOtherEscape", `"\ud800\n"`, 1, `unpaired surrogate \ud800 in string`},
		{"LoneLowSurrogate", `"\udc00"`, 1, `unpaired surrogate \udc00 in string`},
		{"ReversedPair", `"\ude00\ud83d"`, 1, `unpaired surrogate \ude00 in string`},
		{"LoneSurrogateInName", `{"\udfff":1}`, 2, `unpaired surrogate \udfff in string`},
		{"DuplicateName", `{"a":1,"a":2}`, 7, `duplicate member name "a"`},
		{"DuplicateAfterUnescape", `{"a":1,"\u0061":2}`, 7, `duplicate member name "a"`},
		{"DuplicateLongName", `{"` + strings.Repeat("n", 400_000) + `":1,"` + strings.Repeat("n", 400_000) + `":2}`, 400_006,
			`duplicate member name "` + strings.Repeat("n", maxQuoted) + `"… (400000 bytes, cut)`},
		{"DuplicateNested", `{"x":{"b":1,"b":2}}`, 12, `duplicate member name "b"`},
		// The repeated name starts where the closing brace was without it.
		{"DuplicateInLargeObject", manyMembers(40, true), len(manyMembers(40, false)), `duplicate member name "k00"`},
		{"ControlCharInString", "\"a\tb\"", 2, "unescaped control character U+0009 in string"},
		{"NulInString", "\"\x00\"", 1, "unescaped control character U+0000 in string"},
		{"NewlineInName", "{\"a\nb\":1}", 3, "unescaped control character U+000A in string"},
		{"LeadingZero", `01`, 0, "leading zero in number"},
		{"NegativeLeadingZero", `[-00.5]`, 2, "leading zero in number"},
		{"PlusSign", `+1`, 0, `unexpected character '+'`},
		{"LeadingDot", `.5`, 0, `unexpected character '.'`},
		{"TrailingDot", `1.`, 2, "missing digits after decimal point"},
		{"DotBeforeExponent", `[1.e5]`, 3, "missing digits after decimal point"},
		{"MissingExponentDigits", `1e`, 2, "missing digits in exponent"},
		{"SignedMissingExponentDigits", `[1E+]`, 4, "missing digits in exponent"},
		{"BareMinus", `-`, 1, "missing digits after minus sign"},
		{"MinusInfinity", `-Infinity`, 1, "missing digits after minus sign"},
		{"NaN", `NaN`, 0, `unexpected character 'N'`},
		{"Infinity", `[Infinity]`, 1, `unexpected character 'I'`},
		{"InvalidLiteral", `nul`, 0, "invalid literal"},
		{"MisspelledLiteral", `[tru]`, 1, "invalid literal"},
		{"CapitalisedLiteral", `True`, 0, `unexpected character 'T'`},
		{"UnterminatedString", `"abc`, 0, "unterminated string"},
		{"UnterminatedEscape", `["\`, 1, "unterminated string"},
		{"UnterminatedUnicodeEscape", `"\u12`, 0, "unterminated string"},
		{"InvalidEscape", `"\x"`, 2, `invalid escape character 'x' in string`},
		{"InvalidHexDigit", `"\u12g4"`, 5, `invalid hex digit in \u escape`},
		{"UnterminatedArray", `[1,2`, 4, "unexpected end of input"},
		{"UnterminatedObject", `{"a":1`, 6, "unexpected end of input"},
		{"MissingValue", `{"a":}`, 5, `unexpected character '}'`},
		{"MissingComma", `[1 2]`, 3, "expected ',' or ']' after array element"},
		{"MissingObjectComma", `{"a":1 "b":2}`, 7, "expected ',' or '}' after object member"},
		{"TrailingCommaArray", `[1,]`, 3, `unexpected character ']'`},
		{"TrailingCommaObject", `{"a":1,}`, 7, "expected string for member name"},
		{"MissingColon", `{"a" 1}`, 5, "expected ':' after member name"},
		{"SingleQuotedName", `{'a':1}`, 1, "expected string for member name"},
		{"UnquotedName", `{a:1}`, 1, "expected string for member name"},
		{"FormFeedIsNotWhitespace", "\f1", 0, `unexpected character '\f'`},
		{"TooDeepArrays", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), maxDepth, "nesting deeper than 1000 levels"},
		{"TooDeepObjects", strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1), 5 * maxDepth, "nesting deeper than 1000 levels"},
		{"HostileDepth", strings.Repeat("[", 1_000_000), maxDepth, "nesting deeper than 1000 levels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantSyntaxError(t, tc.in, tc.off, tc.msg)
		})
	}
}

func TestCanonicalizeMaxDepthAccepted(t *testing.T) {
	t.Parallel()
	t.Run("Arrays", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
		require.Equal(t, in, mustCanonicalize(t, in))
	})
	t.Run("Objects", func(t *testing.T) {
		t.Parallel()
		in := strings.Repeat(`{"a":`, maxDepth-1) + "{}" + strings.Repeat("}", maxDepth-1)
		require.Equal(t, in, mustCanonicalize(t, in))
	})
}

func TestSyntaxErrorError(t *testing.T) {
	t.Parallel()
	_, err := Canonicalize([]byte(`{"x":0,"a":1,"a":2}`))
	require.EqualError(t, err, `duplicate member name "a" at offset 13`)
	var se *SyntaxError
	require.True(t, errors.As(err, &se))
	require.Equal(t, &SyntaxError{Offset: 13, Msg: `duplicate member name "a"`}, se)
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, a, b string
		less       bool
	}{
		{"ASCII", "a", "b", true},
		{"Prefix", "a", "ab", true},
		{"EmptyFirst", "", "a", true},
		{"BMPBeforeSurrogateRange", "\u20ac", "\U0001F600", true},
		{"SupplementaryBeforePrivateUse", "\U0001F600", "\uE000", true},
		{"SupplementaryBeforeFFFF", "\U00010000", "\uFFFF", true},
		{"SameHighSurrogate", "\U0001F600", "\U0001F601", true},
		{"DifferentHighSurrogate", "\U0001F600", "\U00020000", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.less, compareUTF16(tc.a, tc.b) < 0)
			require.Equal(t, tc.less, compareUTF16(tc.b, tc.a) > 0)
			require.Zero(t, compareUTF16(tc.a, tc.a))
		})
	}
}

// manyMembers builds an object with n members in reverse name order, large
// enough to exercise the map-based duplicate check; dup appends a repeat of
// the first-sorted name as the last member. Values carry a redundant ".0" so
// they are canonicalised as well as moved.
func manyMembers(n int, dup bool) string {
	parts := make([]string, 0, n+1)
	for i := n - 1; i >= 0; i-- {
		parts = append(parts, fmt.Sprintf(`"k%02d":%d.0`, i, i))
	}
	if dup {
		parts = append(parts, `"k00":0`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func manyMembersSorted(n int) string {
	parts := make([]string, 0, n)
	for i := range n {
		parts = append(parts, fmt.Sprintf(`"k%02d":%d`, i, i))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
