// Package dburltest holds the hostile passwords every binary's tests
// start with, to check that no start-up line or error shows one.
package dburltest

import (
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// Marker begins every hostile password and appears in no output
// otherwise: output holding it shows a part of a password.
const Marker = "Zq9"

// Passwords are passwords pattern-based masking let through: quotes, white
// space, an unencoded "@" or ":", a percent sign.
var Passwords = []string{Marker + `it's`, Marker + `say "hi"`, Marker + "two words", Marker + "p@ss", Marker + "a:b@c", Marker + "%77x"}

// DSNs writes each password into the PostgreSQL URL db (with a query, and
// a user in its userinfo) every way a careless operator might:
// percent-encoded in the userinfo (a cluster that trusts connects), as
// typed in the userinfo, and as a parameter whose name is percent-encoded
// (pass%77ord, which pgx reads as password).
func DSNs(t *testing.T, db string) []string {
	t.Helper()
	u, err := url.Parse(db)
	require.NoError(t, err)
	user := u.User.Username()
	var out []string
	for _, pw := range Passwords {
		enc := *u
		enc.User = url.UserPassword(user, pw)
		raw := strings.Replace(db, "://"+user+"@", "://"+user+":"+pw+"@", 1)
		out = append(out, enc.String(), raw, db+"&pass%77ord="+url.QueryEscape(pw))
	}
	return out
}

// Shown is how a start-up line names the PostgreSQL URL db: its scheme,
// host, port and database, read here from the URL itself, so that a test
// holds the line to the server it really used.
func Shown(t *testing.T, db string) string {
	t.Helper()
	u, err := url.Parse(db)
	require.NoError(t, err)
	return "(postgres postgres://" + u.Host + u.Path + ")"
}
