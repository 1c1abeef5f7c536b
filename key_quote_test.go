package idem_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
)

// the spec admits a key as an RFC 8941 sf-string or a bare token.
// ParseKey's bare branch accepts any visible ASCII but ';' and ',', so values
// that are neither a token (RFC 9110 tchar, or RFC 8941 sf-token's extra ':'
// and '/') nor a well-formed sf-string pass: a stray DQUOTE or backslash in
// the middle of a bare value. `ab"c` is a malformed structured field (an
// RFC 8941 parser rejects it), and it aliases the quoted key "ab\"c".
func TestBareKeyHasNoQuoteOrBackslash(t *testing.T) {
	t.Parallel()
	for _, v := range []string{`ab"c`, `abc"`, `a\b`} {
		_, err := idem.ParseKey([]string{v})
		require.Error(t, err, "bare key %q is neither a token nor a quoted string", v)
	}
}
