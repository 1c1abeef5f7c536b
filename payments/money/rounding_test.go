package money_test

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments/money"
)

// roundingTables are the tables the rounding properties are checked on: the
// built-in one, and one with three-decimal, zero-decimal and eight-decimal
// currencies whose cross rates do not terminate.
func roundingTables(t *testing.T) map[string]*money.Table {
	t.Helper()
	odd, err := money.NewTable(money.TableSpec{
		Base:     "EUR",
		Rates:    map[string]string{"EUR": "1", "KWD": "0.333", "CLP": "1023.7", "XTS": "0.00001713", "GBP": "0.86"},
		Decimals: map[string]int{"XTS": 8},
	})
	require.NoError(t, err)
	return map[string]*money.Table{"Default": money.DefaultTable(), "Odd": odd}
}

// pair is one conversion direction of a table, with the factors that turn a
// debited amount (minor units of from) into minor units of to: at the
// applied rate, and at the exact ratio of the table's published rates.
type pair struct {
	from, to money.Currency
	rate     money.Rate
	applied  *big.Rat // rate × 10^to.Decimals ÷ 10^from.Decimals
	exact    *big.Rat // rates[to] ÷ rates[from] × 10^to.Decimals ÷ 10^from.Decimals
}

func pairs(t *testing.T, tab *money.Table) []pair {
	t.Helper()
	spec := tab.Spec()
	var out []pair
	for _, f := range tab.Codes() {
		for _, g := range tab.Codes() {
			if f == g {
				continue
			}
			from, _ := tab.Currency(f)
			to, _ := tab.Currency(g)
			rate, err := tab.Rate(f, g)
			require.NoError(t, err)
			scale := new(big.Rat).SetFrac(pow10(to.Decimals), pow10(from.Decimals))
			exact := new(big.Rat).Quo(rat(t, spec.Rates[g]), rat(t, spec.Rates[f]))
			out = append(out, pair{
				from: from, to: to, rate: rate,
				applied: new(big.Rat).Mul(rat(t, rate.String()), scale),
				exact:   exact.Mul(exact, scale),
			})
		}
	}
	return out
}

func rat(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	require.True(t, ok, s)
	return r
}

// seeded returns a random source whose seed a failing test logs.
func seeded(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random seed %d", seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed))
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// checkConversion converts amount along p and checks, exactly: the credit
// is at most the debit times the applied rate, less than one minor unit
// below it (the rounding is down, by less than a unit), and at most the
// debit's worth at the published rates. Each bound is a fraction n/d,
// compared as credit × d ≤ amount × n in integers; x and y are scratch.
func checkConversion(t *testing.T, p pair, amount int64, x, y *big.Int) {
	got, err := money.Convert(amount, p.from, p.to, p.rate)
	if err != nil {
		t.Fatalf("%d %s→%s: %v", amount, p.from.Code, p.to.Code, err)
	}
	above := func(credit int64, bound *big.Rat) bool {
		x.SetInt64(credit).Mul(x, bound.Denom())
		y.SetInt64(amount).Mul(y, bound.Num())
		return x.Cmp(y) > 0
	}
	switch {
	case above(got, p.applied):
		t.Fatalf("%d %s→%s at %s credits %d, more than the debit times the rate", amount, p.from.Code, p.to.Code, p.rate, got)
	case !above(got+1, p.applied):
		t.Fatalf("%d %s→%s at %s credits %d, a whole unit or more below the debit times the rate", amount, p.from.Code, p.to.Code, p.rate, got)
	case above(got, p.exact):
		t.Fatalf("%d %s→%s credits %d, more than the debit is worth at the published rates", amount, p.from.Code, p.to.Code, got)
	}
}

// TestConvertNeverCreditsMore checks every pair of every table for every
// amount from 1 to 10,000 minor units, and for random amounts up to
// MaxAmount.
func TestConvertNeverCreditsMore(t *testing.T) {
	t.Parallel()
	for name, tab := range roundingTables(t) {
		for _, p := range pairs(t, tab) {
			t.Run(name+p.from.Code+p.to.Code, func(t *testing.T) {
				t.Parallel()
				x, y := new(big.Int), new(big.Int)
				for amount := int64(1); amount <= 10_000; amount++ {
					checkConversion(t, p, amount, x, y)
				}
				rng := seeded(t)
				for range 2_000 {
					amount := 1 + rng.Int64N(money.MaxAmount)
					if _, err := money.Convert(amount, p.from, p.to, p.rate); err != nil {
						continue // too large for int64 in the target currency
					}
					checkConversion(t, p, amount, x, y)
				}
			})
		}
	}
}

// TestConvertRoundTrip converts A→B→A and never ends above the start, for
// every amount from 1 to 10,000 and random large amounts.
func TestConvertRoundTrip(t *testing.T) {
	t.Parallel()
	for name, tab := range roundingTables(t) {
		for _, p := range pairs(t, tab) {
			t.Run(name+p.from.Code+p.to.Code, func(t *testing.T) {
				t.Parallel()
				back, err := tab.Rate(p.to.Code, p.from.Code)
				require.NoError(t, err)
				trip := func(amount int64) {
					there, err := money.Convert(amount, p.from, p.to, p.rate)
					if err != nil || there == 0 {
						return // refused: too large, or credits nothing
					}
					home, err := money.Convert(there, p.to, p.from, back)
					if err != nil {
						t.Fatalf("%d %s→%s→%s: %v", amount, p.from.Code, p.to.Code, p.from.Code, err)
					}
					if home > amount {
						t.Fatalf("%d %s → %d %s → %d %s: more than the start", amount, p.from.Code, there, p.to.Code, home, p.from.Code)
					}
				}
				for amount := int64(1); amount <= 10_000; amount++ {
					trip(amount)
				}
				rng := seeded(t)
				for range 2_000 {
					trip(1 + rng.Int64N(money.MaxAmount))
				}
			})
		}
	}
}

// TestConvertCannotPump replays the reported attack: a user who
// picks the amounts whose conversion rounds most in their favour, over and
// over, never raises the worth of their balances at the published rates.
func TestConvertCannotPump(t *testing.T) {
	t.Parallel()
	tab := money.DefaultTable()
	spec := tab.Spec()
	jpy, _ := tab.Currency("JPY")
	usd, _ := tab.Currency("USD")
	toUSD, err := tab.Rate("JPY", "USD")
	require.NoError(t, err)
	toJPY, err := tab.Rate("USD", "JPY")
	require.NoError(t, err)
	// worth is the balances' value in USD minor units at the published rates.
	worth := func(yen, cents int64) *big.Rat {
		w := new(big.Rat).Quo(new(big.Rat).SetInt64(yen*100), rat(t, spec.Rates["JPY"]))
		return w.Add(w, new(big.Rat).SetInt64(cents))
	}
	yen, cents := int64(1001), int64(0)
	start := worth(yen, cents)
	for range 200 {
		// The most favourable small conversion in each direction: the
		// amount whose credit is largest relative to its debit.
		best := func(balance int64, from, to money.Currency, rate money.Rate) (int64, int64) {
			var amount, credit int64
			for a := int64(1); a <= min(balance, 10); a++ {
				c, err := money.Convert(a, from, to, rate)
				require.NoError(t, err)
				if c > 0 && (amount == 0 || c*amount > credit*a) {
					amount, credit = a, c
				}
			}
			return amount, credit
		}
		if a, c := best(yen, jpy, usd, toUSD); a > 0 {
			yen, cents = yen-a, cents+c
		}
		if a, c := best(cents, usd, jpy, toJPY); a > 0 {
			cents, yen = cents-a, yen+c
		}
		require.LessOrEqual(t, worth(yen, cents).Cmp(start), 0, "%d JPY + %d cents is worth more than 1001 JPY", yen, cents)
	}
}
