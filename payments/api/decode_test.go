package api

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/payments"
)

func TestDecodeObject(t *testing.T) {
	t.Parallel()
	decode := func(body string) (string, int64, []payments.FieldError) {
		var (
			c string
			n int64
		)
		err := decodeObject([]byte(body), currencyMember("currency", &c), amountMember("amount", &n))
		if err == nil {
			return c, n, nil
		}
		v, ok := err.(*payments.ValidationError)
		require.True(t, ok, "%T", err)
		return c, n, v.Fields
	}
	c, n, errs := decode(" {\n\t\"amount\" : 1000000000000000 ,\"currency\":\"USD\" }\n")
	require.Empty(t, errs)
	require.Equal(t, "USD", c)
	require.Equal(t, int64(1000000000000000), n)

	for body, want := range map[string][]payments.FieldError{
		``:                                {{Field: "", Detail: "the body must be a JSON object"}},
		`null`:                            {{Field: "", Detail: "the body must be a JSON object"}},
		"{\"currency\":\"\xff\"}":         {{Field: "", Detail: "the body is not valid UTF-8"}},
		`{"currency":"USD","amount":}`:    {{Field: "", Detail: "the body is not well-formed JSON"}},
		`{"currency":"USD","amount":1}]`:  {{Field: "", Detail: "the body has data after its JSON object"}},
		`{"currency":"USD","amount":1} 1`: {{Field: "", Detail: "the body has data after its JSON object"}},
		`{"currency":"USD","amount":1,"amount":2}`:        {{Field: "amount", Detail: "appears more than once"}},
		`{"currency":"USD","amount":1,"x/y~z":{"a":[1]}}`: {{Field: "x/y~z", Detail: "is not a member of this request"}},
		`{"currency":null,"amount":-0}`: {
			{Field: "currency", Detail: `must be a string holding a currency code, such as "USD"`},
			{Field: "amount", Detail: "must be an integer from 1 to 1000000000000000 (minor units)"},
		},
		`{"amount":9223372036854775808,"currency":"USD"}`: {{Field: "amount", Detail: "must be an integer from 1 to 1000000000000000 (minor units)"}},
	} {
		_, _, errs := decode(body)
		require.Equal(t, want, errs, "%q", body)
	}
	require.Equal(t, "#/x~1y~0z", pointer("x/y~z"))
	require.Equal(t, "#/a%20b", pointer("a b"))
	require.Equal(t, "#", pointer(""))
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "  Bearer   abc  ": "abc"} {
		got, ok := bearerToken([]string{in})
		require.True(t, ok, in)
		require.Equal(t, want, got)
	}
	for _, in := range [][]string{nil, {""}, {"Bearer"}, {"Bearer "}, {"Basic abc"}, {"Bearer a b"}, {"Bearer a", "Bearer a"}} {
		_, ok := bearerToken(in)
		require.False(t, ok, "%q", in)
	}
}
