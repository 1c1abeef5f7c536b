package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// TestScopeFlagAliases: --requests-per-user and keys show's --user-id, the
// old names of --requests-per-scope and --scope (idem-gateway's words),
// still work for a release, each with one line saying what replaces it.
func TestScopeFlagAliases(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--body-memory-mb", "1", "--requests-per-user", "1", "--body-timeout", "1m")
	require.Contains(t, s.stderr.String(), "paymentsd: --requests-per-user is deprecated: use --requests-per-scope\n")
	u, other := s.newUser(t), s.newUser(t)
	hold, r := holdInFlight(t, s, u)
	defer hold.conn.Close()
	require.Equal(t, "too-many-requests", r.problemType(t), "the old flag set the bound: one request in flight")

	key := newKey() // another user's: u's one request is in flight
	require.Equal(t, 201, other.post(t, "/v1/deposits", key, `{"currency":"USD","amount":100}`).status)
	for _, c := range []struct{ flag, warning string }{
		{"--scope", ""},
		{"--user-id", "paymentsd: --user-id is deprecated: use --scope\n"},
	} {
		out, errOut, code := runCLI(t, env(), "keys", "show", "--db", s.db, c.flag, other.id, "--key", key)
		require.Zero(t, code, errOut)
		require.Equal(t, c.warning, errOut)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		require.Equal(t, "COMPLETED", v["status"], out)
	}
	require.NotContains(t, s.stderr.String(), "--requests-per-scope is deprecated")
}

// TestVersionCommand: "paymentsd version" prints the version line, as
// idem-gateway's and bankd's do.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, env(), "version")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "paymentsd "), "%q", out)
}
