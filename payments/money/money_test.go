package money_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments/money"
)

var (
	usd = money.Currency{Code: "USD", Decimals: 2}
	eur = money.Currency{Code: "EUR", Decimals: 2}
	jpy = money.Currency{Code: "JPY", Decimals: 0}
	kwd = money.Currency{Code: "KWD", Decimals: 3}
)

func TestConvert(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		amount   int64
		from, to money.Currency
		rate     string
		want     int64
	}{
		{"Simple", 1000, usd, eur, "0.92", 920},
		{"CentsToYen", 1000, usd, jpy, "151.5", 1515},
		{"YenToCents", 1515, jpy, usd, "0.00660066", 999}, // 999.99999 → 999
		{"ThreeDecimals", 100, usd, kwd, "0.307", 307},
		// Every fraction of a minor unit is rounded down: the house keeps it.
		{"HalfDown", 1, usd, eur, "2.5", 2},             // 2.5 → 2
		{"OneAndAHalf", 3, usd, eur, "0.5", 1},          // 1.5 → 1
		{"NearlyOne", 1, usd, eur, "0.9999", 0},         // 0.9999 → 0
		{"JustAboveOne", 1, usd, eur, "1.0001", 1},      // 1.0001 → 1
		{"YenToHalfCent", 1, jpy, usd, "0.005", 0},      // 0.5 cent → 0
		{"YenAlmostTwoCents", 3, jpy, usd, "0.0066", 1}, // 1.98 cents → 1
		{"Max", money.MaxAmount, usd, eur, "1", money.MaxAmount},
		{"Zero", 0, usd, eur, "0.92", 0},
		{"ExactLongRate", 123456789, usd, eur, "0.1234567891", 15241578}, // 15241578.77 → 15241578
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := money.Convert(c.amount, c.from, c.to, money.MustParseRate(c.rate))
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestConvertOverflow(t *testing.T) {
	t.Parallel()
	_, err := money.Convert(money.MaxAmount, usd, jpy, money.MustParseRate("100000000"))
	require.ErrorContains(t, err, "too large")
	_, err = money.Convert(-1, usd, eur, money.MustParseRate("1"))
	require.Error(t, err)
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"0.92": "0.92", "1": "1", "1.0": "1", "151.500": "151.5", "0.000001": "0.000001", "10": "10"} {
		r, err := money.ParseRate(in)
		require.NoError(t, err, in)
		require.Equal(t, want, r.String(), in)
	}
	for _, in := range []string{"", "0", "0.000", "-1", "+1", "1e3", "1.", ".5", "01", "1,5", " 1", "NaN", "0.1234567890123456789"} {
		_, err := money.ParseRate(in)
		require.Error(t, err, "%q", in)
	}
}

func TestDefaultTable(t *testing.T) {
	t.Parallel()
	tab := money.DefaultTable()
	require.Equal(t, "USD", tab.Base())
	require.Equal(t, []string{"ARS", "BRL", "EUR", "GBP", "JPY", "MXN", "USD"}, tab.Codes())
	jp, ok := tab.Currency("JPY")
	require.True(t, ok)
	require.Equal(t, 0, jp.Decimals)
	_, ok = tab.Currency("usd")
	require.False(t, ok)

	for _, c := range []struct{ from, to, want string }{
		{"USD", "EUR", "0.92"},
		{"EUR", "USD", "1.0869565217"}, // 1/0.92 = 1.08695652173913…
		{"USD", "JPY", "151.5"},
		{"JPY", "USD", "0.00660066"},   // 1/151.5 = 0.00660066006600…, rounded down
		{"EUR", "GBP", "0.8586956521"}, // 0.79/0.92 = 0.85869565217391…, rounded down
		{"ARS", "JPY", "0.174137931"},
		{"USD", "USD", "1"},
	} {
		r, err := tab.Rate(c.from, c.to)
		require.NoError(t, err)
		require.Equal(t, c.want, r.String(), "%s→%s", c.from, c.to)
	}
	_, err := tab.Rate("USD", "XXX")
	require.Error(t, err)
}

func TestReadTable(t *testing.T) {
	t.Parallel()
	tab, err := money.ReadTable(strings.NewReader(`{"base":"EUR","rates":{"EUR":"1","USD":"1.1","XTS":"2"},"decimals":{"XTS":4}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"EUR", "USD", "XTS"}, tab.Codes())
	x, _ := tab.Currency("XTS")
	require.Equal(t, 4, x.Decimals)
	r, err := tab.Rate("USD", "EUR")
	require.NoError(t, err)
	require.Equal(t, "0.909090909", r.String()) // 1/1.1, rounded down
	spec := tab.Spec()
	require.Equal(t, map[string]string{"EUR": "1", "USD": "1.1", "XTS": "2"}, spec.Rates)
	require.Equal(t, map[string]int{"EUR": 2, "USD": 2, "XTS": 4}, spec.Decimals)

	bad := map[string]string{
		"NumberRate":        `{"base":"USD","rates":{"USD":"1","EUR":0.92}}`,
		"UnknownField":      `{"base":"USD","rates":{"USD":"1"},"extra":1}`,
		"BaseMissing":       `{"base":"USD","rates":{"EUR":"0.92"}}`,
		"BaseNotOne":        `{"base":"USD","rates":{"USD":"2"}}`,
		"UnknownDecimals":   `{"base":"USD","rates":{"USD":"1","XTS":"2"}}`,
		"BadCode":           `{"base":"USD","rates":{"USD":"1","usd":"2"}}`,
		"ZeroRate":          `{"base":"USD","rates":{"USD":"1","EUR":"0"}}`,
		"Trailing":          `{"base":"USD","rates":{"USD":"1"}} {}`,
		"CrossRoundsToZero": `{"base":"USD","rates":{"USD":"1","EUR":"0.00000000001"}}`,
		"OrphanDecimals":    `{"base":"USD","rates":{"USD":"1"},"decimals":{"EUR":2}}`,
		"TooManyDecimals":   `{"base":"USD","rates":{"USD":"1","XTS":"1"},"decimals":{"XTS":9}}`,
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := money.ReadTable(strings.NewReader(in))
			require.Error(t, err)
		})
	}
}
