package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// MaxRateDecimals bounds the fractional digits of a rate read from text.
const MaxRateDecimals = 18

// Rate is an exact, positive decimal exchange rate: units of one currency
// per one major unit of another. Its zero value is not a valid rate.
type Rate struct {
	r *big.Rat
	s string // canonical decimal text: no exponent, no trailing fractional zeros
}

var ratePattern = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// ParseRate parses a plain decimal such as "0.92" or "151.5": no sign, no
// exponent, at most MaxRateDecimals fractional digits, greater than zero.
func ParseRate(s string) (Rate, error) {
	if !ratePattern.MatchString(s) {
		return Rate{}, fmt.Errorf("money: rate %q is not a plain decimal such as 0.92", s)
	}
	if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i-1 > MaxRateDecimals {
		return Rate{}, fmt.Errorf("money: rate %q has more than %d decimals", s, MaxRateDecimals)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return Rate{}, fmt.Errorf("money: rate %q is not a decimal", s)
	}
	if r.Sign() <= 0 {
		return Rate{}, fmt.Errorf("money: rate %q must be greater than zero", s)
	}
	return Rate{r: r, s: canonical(s)}, nil
}

// MustParseRate is ParseRate for constants; it panics on an invalid rate.
func MustParseRate(s string) Rate {
	r, err := ParseRate(s)
	if err != nil {
		panic(err)
	}
	return r
}

// canonical drops trailing fractional zeros and a bare decimal point.
func canonical(s string) string {
	if strings.IndexByte(s, '.') < 0 {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// rateAt rounds x down to scale decimals.
func rateAt(x *big.Rat, scale int) (Rate, error) {
	p := pow10(scale)
	n := floor(new(big.Rat).Mul(x, new(big.Rat).SetInt(p)))
	if n.Sign() == 0 {
		return Rate{}, errors.New("money: rate rounds to zero")
	}
	r := new(big.Rat).SetFrac(n, p)
	return Rate{r: r, s: canonical(r.FloatString(scale))}, nil
}

func (r Rate) rat() *big.Rat {
	if r.r == nil {
		return new(big.Rat)
	}
	return r.r
}

// IsZero reports whether r is the zero value (no rate).
func (r Rate) IsZero() bool { return r.r == nil }

// String returns the rate as a plain decimal, e.g. "1.0869565217".
func (r Rate) String() string { return r.s }

// Equal reports whether two rates have the same value.
func (r Rate) Equal(o Rate) bool { return r.rat().Cmp(o.rat()) == 0 }

// MarshalJSON writes the rate as a JSON string, never a number, so no
// client parses it into a float by accident.
func (r Rate) MarshalJSON() ([]byte, error) { return json.Marshal(r.s) }

// UnmarshalJSON reads a rate from a JSON string.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("money: a rate must be a JSON string such as \"0.92\", got %s", b)
	}
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}
