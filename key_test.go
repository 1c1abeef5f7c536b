package idem_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	valid := map[string]struct {
		in   []string
		want string
	}{
		"Bare":              {[]string{"abc"}, "abc"},
		"Quoted":            {[]string{`"abc"`}, "abc"},
		"UUID":              {[]string{"0b5d3c1e-8f1a-4c52-9a43-2f0e8c3d7b61"}, "0b5d3c1e-8f1a-4c52-9a43-2f0e8c3d7b61"},
		"QuotedEscapes":     {[]string{`"a\"b\\c"`}, `a"b\c`},
		"SurroundingSpaces": {[]string{" abc\t"}, "abc"},
		"AllVisibleASCII":   {[]string{"!#$%&'()*+-./:<=>?@[]^_`{|}~"}, "!#$%&'()*+-./:<=>?@[]^_`{|}~"},
		"MaxLength":         {[]string{strings.Repeat("x", 255)}, strings.Repeat("x", 255)},
		"MaxLengthQuoted":   {[]string{`"` + strings.Repeat("x", 255) + `"`}, strings.Repeat("x", 255)},
	}
	for name, tc := range valid {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := idem.ParseKey(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	invalid := map[string]struct {
		in  []string
		msg string
	}{
		"Missing":          {nil, "missing"},
		"Empty":            {[]string{""}, "empty"},
		"OnlySpaces":       {[]string{"   "}, "empty"},
		"EmptyQuoted":      {[]string{`""`}, "empty"},
		"TooLong":          {[]string{strings.Repeat("x", 256)}, "maximum is 255"},
		"TooLongQuoted":    {[]string{`"` + strings.Repeat("x", 256) + `"`}, "maximum is 255"},
		"InnerSpace":       {[]string{"a b"}, "not visible ASCII"},
		"QuotedInnerSpace": {[]string{`"a b"`}, "not visible ASCII"},
		"Control":          {[]string{"a\x01b"}, "not visible ASCII"},
		"NonASCII":         {[]string{"clé"}, "not visible ASCII"},
		"QuotedNonASCII":   {[]string{"\"cl\xc3\xa9\""}, "not allowed"},
		"Twice":            {[]string{"a", "a"}, "more than once"},
		"Parameters":       {[]string{`"abc";v=1`}, "parameters"},
		"ParametersSpaced": {[]string{`"abc" ;v=1`}, "parameters"},
		"BareParameters":   {[]string{"abc;v=1"}, "parameters"},
		"List":             {[]string{"abc,def"}, "list"},
		"Unterminated":     {[]string{`"abc`}, "no closing quote"},
		"BadEscape":        {[]string{`"a\nb"`}, "may escape only"},
		"TrailingEscape":   {[]string{`"abc\`}, "may escape only"},
		"Trailing":         {[]string{`"abc"def`}, "after the quoted string"},
	}
	for name, tc := range invalid {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := idem.ParseKey(tc.in)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}
