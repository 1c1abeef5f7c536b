package money

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"slices"
	"strings"
)

// CrossScale is the number of decimals a cross rate is rounded down to. The
// rounded rate is the one a conversion applies and reports; rounding it down
// keeps the applied rate at or below the exact ratio of the table's rates,
// so no sequence of conversions raises a user's value at those rates.
const CrossScale = 10

// isoDecimals are the minor-unit exponents of common ISO 4217 currencies, so
// a rates file need only name a currency's rate.
var isoDecimals = map[string]int{
	"AED": 2, "ARS": 2, "AUD": 2, "BHD": 3, "BRL": 2, "CAD": 2, "CHF": 2, "CLP": 0,
	"CNY": 2, "COP": 2, "CZK": 2, "DKK": 2, "EUR": 2, "GBP": 2, "HKD": 2, "HUF": 2,
	"IDR": 2, "ILS": 2, "INR": 2, "ISK": 0, "JOD": 3, "JPY": 0, "KRW": 0, "KWD": 3,
	"MXN": 2, "NOK": 2, "NZD": 2, "OMR": 3, "PEN": 2, "PHP": 2, "PLN": 2, "SEK": 2,
	"SGD": 2, "THB": 2, "TND": 3, "TRY": 2, "USD": 2, "UYU": 2, "VND": 0, "ZAR": 2,
}

// defaultRates are the built-in units per one US dollar: fixed, illustrative
// values, not market data. Override them with a rates file.
var defaultRates = map[string]string{
	"USD": "1",
	"EUR": "0.92",
	"GBP": "0.79",
	"JPY": "151.5",
	"ARS": "870",
	"BRL": "5.05",
	"MXN": "17.1",
}

// Table is a set of supported currencies and their rates against one base
// currency. Cross rates are derived from it: from → to is
// perBase(to) ÷ perBase(from), rounded down to CrossScale decimals.
// A Table is immutable and safe for concurrent use.
type Table struct {
	base       string
	currencies map[string]Currency
	perBase    map[string]Rate
}

// DefaultTable returns the built-in table: USD, EUR, GBP, JPY, ARS, BRL and
// MXN against USD.
func DefaultTable() *Table {
	t, err := NewTable(TableSpec{Base: "USD", Rates: defaultRates})
	if err != nil {
		panic(err) // the built-in table is valid; TestDefaultTable says so
	}
	return t
}

// TableSpec is a table as text: the rates file format, and what GET
// /v1/rates returns.
type TableSpec struct {
	// Base is the currency the rates are quoted against; its own rate is 1.
	Base string `json:"base"`
	// Rates are units of each currency per one major unit of Base, as
	// decimal strings. Every supported currency is listed, Base included.
	Rates map[string]string `json:"rates"`
	// Decimals are the minor-unit exponents. Optional for the common ISO
	// 4217 currencies, whose exponents are built in.
	Decimals map[string]int `json:"decimals,omitempty"`
}

// NewTable validates spec and builds a table from it.
func NewTable(spec TableSpec) (*Table, error) {
	if !ValidCode(spec.Base) {
		return nil, fmt.Errorf("money: base %q is not a currency code", spec.Base)
	}
	t := &Table{base: spec.Base, currencies: map[string]Currency{}, perBase: map[string]Rate{}}
	var errs []error
	for code, s := range spec.Rates {
		if !ValidCode(code) {
			errs = append(errs, fmt.Errorf("money: %q is not a currency code (three upper-case letters)", code))
			continue
		}
		r, err := ParseRate(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", code, err))
			continue
		}
		d, ok := spec.Decimals[code]
		if !ok {
			d, ok = isoDecimals[code]
		}
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("money: the decimals of %s are unknown: add them under \"decimals\"", code))
			continue
		case d < 0 || d > MaxDecimals:
			errs = append(errs, fmt.Errorf("money: %s has %d decimals; want 0 to %d", code, d, MaxDecimals))
			continue
		}
		t.currencies[code] = Currency{Code: code, Decimals: d}
		t.perBase[code] = r
	}
	for code := range spec.Decimals {
		if _, ok := spec.Rates[code]; !ok {
			errs = append(errs, fmt.Errorf("money: decimals given for %s, which has no rate", code))
		}
	}
	if r, ok := t.perBase[spec.Base]; !ok {
		errs = append(errs, fmt.Errorf("money: the base %s must be listed with rate \"1\"", spec.Base))
	} else if !r.Equal(MustParseRate("1")) {
		errs = append(errs, fmt.Errorf("money: the base %s has rate %s; it must be 1", spec.Base, r))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Every cross rate must survive rounding, or some pair could not convert.
	for _, from := range t.Codes() {
		for _, to := range t.Codes() {
			if _, err := t.Rate(from, to); err != nil {
				return nil, fmt.Errorf("money: %s to %s: %w", from, to, err)
			}
		}
	}
	return t, nil
}

// ReadTable reads a table in the TableSpec JSON format. Rates must be JSON
// strings; unknown fields are an error.
func ReadTable(r io.Reader) (*Table, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var spec TableSpec
	if err := dec.Decode(&spec); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && strings.HasPrefix(te.Field, "rates") {
			return nil, errors.New(`money: rates file: a rate must be a JSON string such as "0.92", not a number`)
		}
		return nil, fmt.Errorf("money: rates file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("money: rates file: data after the JSON object")
	}
	return NewTable(spec)
}

// Base returns the currency the table is quoted against.
func (t *Table) Base() string { return t.base }

// Codes returns the supported currency codes in order.
func (t *Table) Codes() []string { return slices.Sorted(maps.Keys(t.currencies)) }

// Currency returns a supported currency.
func (t *Table) Currency(code string) (Currency, bool) {
	c, ok := t.currencies[code]
	return c, ok
}

// Rate returns the cross rate from → to: units of to per one major unit of
// from, rounded down to CrossScale decimals. It is exactly 1 for equal
// currencies.
func (t *Table) Rate(from, to string) (Rate, error) {
	f, ok := t.perBase[from]
	if !ok {
		return Rate{}, fmt.Errorf("money: unsupported currency %q", from)
	}
	g, ok := t.perBase[to]
	if !ok {
		return Rate{}, fmt.Errorf("money: unsupported currency %q", to)
	}
	return rateAt(new(big.Rat).Quo(g.rat(), f.rat()), CrossScale)
}

// Spec returns the table as text, every currency's decimals included.
func (t *Table) Spec() TableSpec {
	spec := TableSpec{Base: t.base, Rates: map[string]string{}, Decimals: map[string]int{}}
	for code, c := range t.currencies {
		spec.Rates[code] = t.perBase[code].String()
		spec.Decimals[code] = c.Decimals
	}
	return spec
}
