package jcs

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// rfcAppendixB is RFC 8785 Appendix B without its NaN and Infinity rows,
// which JSON cannot spell and appendFloat therefore never receives.
var rfcAppendixB = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
	{0x3fe0000000000000, "0.5"},
}

func TestAppendFloatRFCAppendixB(t *testing.T) {
	t.Parallel()
	for _, tc := range rfcAppendixB {
		t.Run(strconv.FormatUint(tc.bits, 16), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, string(appendFloat(nil, math.Float64frombits(tc.bits))))
		})
	}
}

// TestCanonicalizeRFCAppendixBFixedPoint checks that the RFC's outputs, fed
// back as literals, survive the exact-decimal check unchanged: they are
// shortest forms, so the departure must not touch them.
func TestCanonicalizeRFCAppendixBFixedPoint(t *testing.T) {
	t.Parallel()
	for _, tc := range rfcAppendixB {
		t.Run(strconv.FormatUint(tc.bits, 16), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, mustCanonicalize(t, tc.want))
		})
	}
}

// TestAppendFloatMatchesEncodingJSON cross-checks the layout against
// encoding/json, which also implements ECMAScript number formatting.
func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(8785, 1))
	for range 100_000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
			continue
		}
		want, err := json.Marshal(f)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendFloat(nil, f)), "bits %x", math.Float64bits(f))
		// Shortest digits are exact by construction, so Canonicalize must
		// agree with plain RFC 8785 here.
		require.Equal(t, string(want), mustCanonicalize(t, strconv.FormatFloat(f, 'g', -1, 64)))
	}
}

func TestCanonicalizeNumbers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"Zero", "0", "0"},
		{"NegativeZero", "-0", "0"},
		{"NegativeZeroFraction", "-0.000", "0"},
		{"ZeroWithExponent", "0e99", "0"},
		{"ZeroWithHugeExponent", "-0.0e-99999999999999999999", "0"},
		{"OnePointZero", "1.0", "1"},
		{"OneExponentZero", "1e0", "1"},
		{"TenExponentMinusOne", "10e-1", "1"},
		{"FractionTimesTen", "0.1E+1", "1"},
		{"Hundred", "1e2", "100"},
		{"TrailingFractionZeros", "4.50", "4.5"},
		{"Negative", "-12.340", "-12.34"},
		{"SmallFraction", "2e-3", "0.002"},
		{"MicroStaysPlain", "0.000001", "0.000001"},
		{"MicroFromExponent", "1e-6", "0.000001"},
		{"BelowMicroUsesExponent", "1e-7", "1e-7"},
		{"NegativeBelowMicro", "-0.00000012", "-1.2e-7"},
		{"TwentyOneDigitsPlain", "1e20", "100000000000000000000"},
		{"TwentyTwoDigitsExponent", "1e21", "1e+21"},
		{"LargeInteger", "123456789012345680000", "123456789012345680000"},
		{"E30", "1E30", "1e+30"},
		{"E23", "100000000000000000000000", "1e+23"},
		{"TinyFraction", "0.000000000000000000000000001", "1e-27"},
		{"ExponentLeadingZeros", "1e0000000000000000000000001", "10"},
		{"MaxSafeInteger", "9007199254740992", "9007199254740992"},
		{"MaxDouble", "1.7976931348623157e308", "1.7976931348623157e+308"},
		{"MinDouble", "5e-324", "5e-324"},
		// Exact-decimal departure: RFC 8785 would round or fail on these.
		{"BeyondMaxSafeInteger", "9007199254740993", "9007199254740993"},
		{"BeyondMaxSafeIntegerSpelledOtherwise", "90071992547409930e-1", "9007199254740993"},
		{"LongFraction", "0.30000000000000000001", "0.30000000000000000001"},
		{"RFCExampleNumber", "333333333.33333329", "333333333.33333329"},
		{"ExactBinaryValueOfPointOne", "0.1000000000000000055511151231257827", "0.1000000000000000055511151231257827"},
		{"MinDoubleSpelledLong", "4.9406564584124654e-324", "4.9406564584124654e-324"},
		{"Overflow", "1e400", "1e+400"},
		{"NegativeOverflow", "-1.50e400", "-1.5e+400"},
		{"Underflow", "1e-400", "1e-400"},
		{"UnderflowPlainDigits", "123e-400", "1.23e-398"},
		{"HalfwayUnderflow", "2e-324", "2e-324"},
		{"HugeExponent", "1e99999999999999999999", "1e+99999999999999999999"},
		{"HugeNegativeExponent", "-12.5e-99999999999999999999", "-1.25e-99999999999999999998"},
		{"ManyDigits", "12345678901234567890.123456789", "12345678901234567890.123456789"},
		{"ManyDigitsBeyondPlainRange", "1234567890123456789012.5", "1.2345678901234567890125e+21"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := mustCanonicalize(t, tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, got, mustCanonicalize(t, got))
		})
	}
}

// TestCanonicalizeDistinctAmountsDoNotCollide is the reason for the
// departure from RFC 8785: each pair is one double but two amounts.
func TestCanonicalizeDistinctAmountsDoNotCollide(t *testing.T) {
	t.Parallel()
	pairs := []struct{ name, a, b string }{
		{"IntegerBeyond2To53", "9007199254740992", "9007199254740993"},
		{"LongFraction", "0.3", "0.30000000000000000001"},
		{"SeventeenDigits", "333333333.3333333", "333333333.33333329"},
		{"Overflow", "1e400", "1e401"},
		{"Underflow", "0", "1e-400"},
	}
	for _, tc := range pairs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fa, _ := strconv.ParseFloat(tc.a, 64)
			fb, _ := strconv.ParseFloat(tc.b, 64)
			require.Equal(t, fa, fb) // the premise: float64 cannot tell them apart
			a := mustCanonicalize(t, `{"amount":`+tc.a+`}`)
			b := mustCanonicalize(t, `{"amount":`+tc.b+`}`)
			require.NotEqual(t, a, b)
		})
	}
}

// TestCanonicalizeHugeExponents covers exponents too long for int64, whose
// printed exponent is computed with digit-string carries and borrows.
func TestCanonicalizeHugeExponents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"CarryIntoNewDigit", "10e999999999999999999", "1e+1000000000000000000"},
		{"BorrowAcrossDigits", "0.001e1000000000000000000", "1e+999999999999999997"},
		{"NegativeExponentGrows", "0.001e-1000000000000000000", "1e-1000000000000000003"},
		{"NegativeExponentShrinks", "123e-1000000000000000000", "1.23e-999999999999999998"},
		{"LeadingZerosStripped", "-7e+0000000000000000000000000000012345678901234567", "-7e+12345678901234567"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := mustCanonicalize(t, tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, got, mustCanonicalize(t, got))
		})
	}
}

func TestDecimalArithmeticMatchesBig(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(8785, 2))
	for range 10_000 {
		mag := fmt.Sprint(r.IntN(9)+1) + fmt.Sprint(r.Uint64())[1:]
		x := r.Uint64N(1 << 62)
		if r.IntN(2) == 0 {
			x %= 1000
		}
		m, _ := new(big.Int).SetString(mag, 10)
		xb := new(big.Int).SetUint64(x)
		require.Equal(t, new(big.Int).Add(m, xb).String(), string(appendAddDecimal(nil, []byte(mag), x)))
		if m.Cmp(xb) > 0 {
			require.Equal(t, new(big.Int).Sub(m, xb).String(), string(appendSubDecimal(nil, []byte(mag), x)))
		}
	}
}
