package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/internal/dburl/dburltest"
	"github.com/idem-dev/idem/internal/require"
)

// TestCredentialsRedacted: a password given anywhere in the database
// argument (userinfo, password=, sslpassword=, a MySQL DSN), by --db or
// $DATABASE_URL, is masked in every error and every log line.
func TestCredentialsRedacted(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]string{
		"PasswordParam":    "postgres://who@127.0.0.1:1/db?connect_timeout=5&password=s3cret",
		"SSLPasswordParam": "postgres://who@127.0.0.1:1/db?connect_timeout=5&sslmode=disable&sslpassword=s3cret",
		"MultiHost":        "postgres://who:s3cret@127.0.0.1:1,127.0.0.1:2/db?connect_timeout=5",
		"MySQLParam":       "mysql://who@127.0.0.1:1/db?password=s3cret",
		"MySQLDSN":         "who:s3cret@tcp(127.0.0.1:1)/db",
	} {
		for _, via := range []string{"Flag", "DatabaseURL"} {
			t.Run(name+via, func(t *testing.T) {
				t.Parallel()
				args, environ := []string{"migrate", "--db", db}, env()
				if via == "DatabaseURL" {
					args, environ = []string{"migrate"}, env("DATABASE_URL="+db)
				}
				dir := t.TempDir()
				_, errOut, code := runCLIIn(t, dir, environ, args...)
				require.Equal(t, 1, code, errOut)
				require.Contains(t, errOut, "connect to ")
				require.NotContains(t, errOut, "s3cret")
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				require.Empty(t, entries, "nothing created")
			})
		}
	}
	t.Run("LogLines", func(t *testing.T) {
		t.Parallel()
		// PostgreSQL's trust authentication ignores the password: the
		// server starts, and its "database ready" line names the URL.
		db := newDB(t, "postgres") + "&password=s3cret"
		s := startServer(t, db)
		s.stop(t)
		require.Contains(t, s.stderr.String(), "database ready")
		require.NotContains(t, s.stderr.String(), "s3cret")
	})
}

// TestDatabaseForms: every supported form opens what it names, and an
// unsupported one is one line, exit 2, nothing created.
func TestDatabaseForms(t *testing.T) {
	t.Parallel()
	t.Run("MySQLDSNIsMySQL", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		_, errOut, code := runCLIIn(t, dir, env(), "migrate", "--db", "root@tcp(127.0.0.1:1)/db")
		require.Equal(t, 1, code, errOut)
		require.Contains(t, errOut, "connect to MySQL at tcp(127.0.0.1:1)/db")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "not taken for a SQLite path")
	})
	t.Run("SQLiteScheme", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "p.db")
		out, errOut, code := runCLI(t, env(), "migrate", "--db", "sqlite://"+path)
		require.Zero(t, code, errOut)
		require.Contains(t, out, "(sqlite "+path+")")
		require.FileExists(t, path)
	})
	for name, args := range map[string][]string{
		"Redis":     {"migrate", "--db", "redis://127.0.0.1:6379"},
		"SQLParams": {"migrate", "--db", "sqlite:x.db?mode=ro"},
		"ZeroBatch": {"keys", "sweep", "--batch-size", "0"},
		"Blank":     {"keys", "sweep", "--db", " "},
	} {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, errOut, code := runCLIIn(t, dir, env(), args...)
			require.Equal(t, 2, code, errOut)
			require.Empty(t, out)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing created")
		})
	}
}

// TestHostilePasswordsNotPrinted runs paymentsd migrate and serve with
// every hostile password in every form: no start-up line and no error
// shows a part of one.
func TestHostilePasswordsNotPrinted(t *testing.T) {
	t.Parallel()
	base := newDB(t, "postgres")
	var all, migrated strings.Builder
	for _, db := range dburltest.DSNs(t, base) {
		out, errOut, code := runCLI(t, env(), "migrate", "--db", db)
		all.WriteString(out + errOut)
		if code == 0 {
			migrated.WriteString(out)
		}
	}
	require.NotContains(t, all.String(), dburltest.Marker)
	require.Contains(t, migrated.String(), dburltest.Shown(t, base), "the migrate line shows the database")
	// A server's start-up lines: "database ready", "the database has no
	// users", the demo's hint.
	for _, db := range []string{dburltest.DSNs(t, base)[0], dburltest.DSNs(t, base)[2]} {
		s := startServer(t, db)
		s.stop(t)
		require.Contains(t, s.stderr.String(), "database ready")
		require.NotContains(t, s.stderr.String()+s.stdout.String(), dburltest.Marker)
	}
}
