// Package money is exact arithmetic for amounts of money: integer minor
// units, decimal exchange rates, and conversion rounded down, so no
// conversion creates value. Nothing in it uses floating point.
package money

import (
	"fmt"
	"math/big"
	"regexp"
)

// MaxAmount is the largest amount, in minor units, that one deposit or
// transaction may move, and the largest converted amount a transaction may
// credit: 10^15 (ten trillion dollars in cents).
const MaxAmount int64 = 1_000_000_000_000_000

// MaxDecimals bounds a currency's minor-unit exponent.
const MaxDecimals = 8

// Currency is an ISO 4217 currency and the number of decimals of its minor
// unit: 2 for USD (cents), 0 for JPY.
type Currency struct {
	Code     string
	Decimals int
}

var codePattern = regexp.MustCompile(`^[A-Z]{3}$`)

// ValidCode reports whether s looks like an ISO 4217 code: three upper-case
// letters.
func ValidCode(s string) bool { return codePattern.MatchString(s) }

// pow10 returns 10^n as a big.Int.
func pow10(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// floor rounds a non-negative rational down to an integer.
func floor(x *big.Rat) *big.Int {
	if x.Sign() < 0 {
		panic("money: floor of a negative number")
	}
	return new(big.Int).Quo(x.Num(), x.Denom())
}

// Convert converts amount minor units of from into minor units of to at
// rate (units of to per one major unit of from):
//
//	amount ÷ 10^from.Decimals × rate × 10^to.Decimals, rounded down.
//
// Rounding down means a conversion never credits more than the debited
// amount is worth at rate: the fraction of a minor unit stays with the
// house. It fails when the result does not fit in an int64.
func Convert(amount int64, from, to Currency, rate Rate) (int64, error) {
	if amount < 0 {
		return 0, fmt.Errorf("money: cannot convert a negative amount %d", amount)
	}
	x := new(big.Rat).SetInt64(amount)
	x.Mul(x, rate.rat())
	x.Mul(x, new(big.Rat).SetFrac(pow10(to.Decimals), pow10(from.Decimals)))
	n := floor(x)
	if !n.IsInt64() {
		return 0, fmt.Errorf("money: %d %s at %s is too large to convert to %s", amount, from.Code, rate, to.Code)
	}
	return n.Int64(), nil
}
