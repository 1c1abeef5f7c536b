package jcs

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

func mustCanonicalize(t *testing.T, in string) string {
	t.Helper()
	out, err := Canonicalize([]byte(in))
	require.NoError(t, err, "input %q", in)
	return string(out)
}

func wantSyntaxError(t *testing.T, in string, off int, msg string) {
	t.Helper()
	out, err := Canonicalize([]byte(in))
	require.Nil(t, out, "output returned alongside an error")
	var se *SyntaxError
	require.ErrorAs(t, err, &se)
	require.Equal(t, msg, se.Msg)
	require.Equal(t, off, se.Offset)
}
