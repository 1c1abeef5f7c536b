package main_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// TestEveryHelp: every command and subcommand answers --help with its
// usage on stdout and exit 0, in one style: flags spelt --name.
func TestEveryHelp(t *testing.T) {
	t.Parallel()
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"serve", "--help"}, {"migrate", "--help"},
		{"users", "--help"}, {"users", "create", "--help"},
		{"keys", "--help"}, {"keys", "show", "--help"}, {"keys", "sweep", "--help"},
	} {
		t.Run(camel(strings.Join(args, "")), func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCLI(t, env(), args...)
			require.Zero(t, code, errOut)
			require.Empty(t, errOut)
			require.Contains(t, out, "Usage")
			require.NotRegexp(t, singleDash, out, "flags are spelt --name")
			if len(args) == 1 {
				for _, cmd := range []string{"[serve]", "migrate", "users create", "keys show", "keys sweep", "version"} {
					require.Contains(t, out, "paymentsd "+cmd)
				}
			}
		})
	}
	out, _, _ := runCLI(t, env(), "keys", "sweep", "--help")
	require.Contains(t, out, "--batch-size")
	require.Contains(t, out, "--pause")
}

// TestBadDatabase: --db (or $DATABASE_URL) that is neither a PostgreSQL or
// MySQL URL nor a file path is one line and exit 2, and creates nothing.
func TestBadDatabase(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]string{
		"Conninfo":    "host=127.0.0.1 user=postgres password=s3cret dbname=x",
		"OtherScheme": "redis://127.0.0.1:6379/0",
		"FileURI":     "file:x.db",
		"ConninfoEnv": "",
	} {
		for _, cmd := range [][]string{{"serve"}, {"migrate"}, {"users", "create"}, {"keys", "sweep"}} {
			t.Run(name+camel(strings.Join(cmd, "")), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				environ := env()
				args := append(cmd, "--db", db)
				if db == "" {
					environ = env("DATABASE_URL=dbname=x host=127.0.0.1")
					args = cmd
				}
				out, errOut, code := runCLIIn(t, dir, environ, args...)
				require.Equal(t, 2, code, "stderr: %s", errOut)
				require.Empty(t, out)
				require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
				require.Contains(t, errOut, "postgres")
				require.NotContains(t, errOut, "s3cret")
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				require.Empty(t, entries, "nothing created")
			})
		}
	}
}

// TestBindBeforeMigrate: with its port taken, serve fails before it
// opens (and creates) the database.
func TestBindBeforeMigrate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "new.db")
	_, errOut, code := runCLI(t, env(), "serve", "--addr", ln.Addr().String(), "--db", db, "--metrics-addr", "")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "address already in use")
	require.NoFileExists(t, db)
}

// TestNoUsersHint: a start on a database without users names the
// command that makes one.
func TestNoUsersHint(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "postgres"))
	require.Contains(t, s.stderr.String(), "paymentsd users create")
}

// TestNoPackageNamesInProblems: a malformed body's problem detail says
// what is wrong without naming an internal package.
func TestNoPackageNamesInProblems(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"))
	u := s.newUser(t)
	r := u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":`)
	require.Equal(t, http.StatusBadRequest, r.status)
	detail := r.json(t)["detail"].(string)
	require.Contains(t, detail, "unexpected end of input")
	require.NotContains(t, detail, "jcs")
}
