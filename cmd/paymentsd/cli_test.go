package main_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

func TestUsersCreate(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			db := newDB(t, store)
			out, errOut, code := runCLI(t, env(), "users", "create", "--db", db)
			require.Zero(t, code, errOut)
			require.Empty(t, errOut)
			require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
			var v map[string]string
			require.NoError(t, json.Unmarshal([]byte(out), &v))
			require.Len(t, v, 2, out)
			require.NoError(t, uuid.Validate(v["user_id"]))
			require.Regexp(t, `^sk_[A-Za-z0-9_-]{43}$`, v["api_key"], "256 bits, base64url")

			// The key works, and is stored only as its hash.
			s := startServer(t, db)
			u := &user{s: s, id: v["user_id"], apiKey: v["api_key"]}
			require.Equal(t, http.StatusOK, u.get(t, "/v1/balances").status)
			require.Zero(t, s.sqlInt(t, `SELECT count(*) FROM api_keys WHERE length(key_hash) <> 32`))
			require.Equal(t, int64(1), s.sqlInt(t, `SELECT count(*) FROM api_keys`))
		})
	}
}

// TestMigrateCitus: migrate --citus distributes an existing database (a
// user made before) on a Citus coordinator (make test-citus): every
// table paymentsd creates, the key table and the wallet by user in one
// co-location group, api_keys and the audit log as reference tables; a
// second run leaves them. Without Citus it fails saying so, and on SQLite
// it is refused.
func TestMigrateCitus(t *testing.T) {
	t.Parallel()
	db := pgtest.SchemaURL(t, pgtest.Schema(t))
	out, errOut, code := runCLI(t, env(), "users", "create", "--db", db)
	require.Zero(t, code, errOut)
	var v map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	out, errOut, code = runCLI(t, env(), "migrate", "--citus", "--db", db)
	if !pgtest.Citus() {
		require.Equal(t, 1, code, out)
		require.Contains(t, errOut, "the citus extension is not installed in this database")
		return
	}
	require.Zero(t, code, errOut)
	require.Contains(t, out, "paymentsd: distributed users, balances, deposits, transactions, payouts, ledger_entries, api_keys, idempotency_keys, idempotency_keys_audit (Citus)")
	out, errOut, code = runCLI(t, env(), "migrate", "--citus", "--db", db)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "paymentsd: every table already distributed (Citus)")

	s := startServer(t, db)
	require.Equal(t, "api_keys:n balances:h deposits:h idempotency_keys:h idempotency_keys_audit:n ledger_entries:h payouts:h transactions:h users:h",
		sqlValue[string](t, s, `SELECT string_agg(c.relname || ':' || p.partmethod::text, ' ' ORDER BY c.relname)
		  FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid WHERE c.relnamespace = current_schema()::regnamespace`))
	require.Equal(t, int64(1), s.sqlInt(t, `SELECT count(DISTINCT p.colocationid)
		  FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
		 WHERE c.relnamespace = current_schema()::regnamespace AND p.partmethod = 'h'`), "one co-location group")
	u := &user{s: s, id: v["user_id"], apiKey: v["api_key"]}
	require.Equal(t, http.StatusOK, u.get(t, "/v1/balances").status, "the user made before distribution signs in")

	_, errOut, code = runCLI(t, env(), "migrate", "--citus", "--db", filepath.Join(t.TempDir(), "p.db"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--citus is for PostgreSQL with the citus extension, not sqlite")
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			db := newDB(t, store)
			out, errOut, code := runCLI(t, env(), "migrate", "--db", db)
			require.Zero(t, code, errOut)
			keys, wallet := "[1 2 3 4 6 7 9]", "[1 2 3 4 6 7]"
			switch store {
			case "mysql":
				keys = "[1 2 3 4 7 8 9 10]" // no 5 (partitions) nor 6: 8 and 9 are its operator's indexes and audit log, 10 completed_at
				wallet = "[1 6 7]"          // its first: the schema the others reach at their fourth
			case "postgres":
				// 5: partitions, the user as text; 8: the key's index across
				// scopes dropped; 9: completed_at
				keys, wallet = "[1 2 3 4 5 6 7 8 9]", "[1 2 3 4 5 6 7]"
			}
			applied := "applied migrations: idempotency keys " + keys + ", wallet " + wallet
			if store == "postgres" && (pgtest.Partitions(t) > 0 || pgtest.Citus()) {
				applied = "schema is up to date" // newDB migrated it with --partitions or --citus
			}
			require.Contains(t, out, applied)
			require.Contains(t, out, "("+store+" ")
			out, errOut, code = runCLI(t, env(), "migrate", "--db", db)
			require.Zero(t, code, errOut)
			require.Contains(t, out, "schema is up to date")
		})
	}
	t.Run("FromDatabaseURL", func(t *testing.T) {
		t.Parallel()
		db := newDB(t, "postgres")
		out, errOut, code := runCLI(t, env("DATABASE_URL="+db), "migrate")
		require.Zero(t, code, errOut)
		require.Contains(t, out, "(postgres ")
	})
	t.Run("PasswordNotPrinted", func(t *testing.T) {
		t.Parallel()
		for _, db := range []string{"postgres://who:s3cret@127.0.0.1:1/db?connect_timeout=5", "mysql://who:s3cret@127.0.0.1:1/db"} {
			_, errOut, code := runCLI(t, env(), "migrate", "--db", db)
			require.Equal(t, 1, code)
			require.NotContains(t, errOut, "s3cret")
			require.Contains(t, errOut, "://127.0.0.1:1/db", "the database shown, not its user or password")
		}
	})
	t.Run("MySQLWithoutDatabase", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := runCLI(t, env(), "migrate", "--db", "mysql://who@127.0.0.1:1/")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "names no database")
	})
}

// TestCommandLineErrors: a bad command line or an unreachable database is
// one clear line on stderr and a non-zero exit.
func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	missingDir := filepath.Join(t.TempDir(), "no", "such", "dir", "p.db")
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"UnknownFlag", []string{"serve", "--bogus"}, 2, "flag provided but not defined: --bogus"},
		{"UnknownFlagDefaultCommand", []string{"--bogus"}, 2, "flag provided but not defined: --bogus"},
		{"BadDuration", []string{"serve", "--idempotency-ttl", "2days"}, 2, `invalid value "2days" for flag --idempotency-ttl: parse error (want a duration such as 30s, 15m or 48h)`},
		{"BadLogLevel", []string{"serve", "--log-level", "verbose"}, 2, "--log-level: want debug, info, warn or error"},
		{"BadLogFormat", []string{"serve", "--log-format", "xml"}, 2, `--log-format "xml": want text or json`},
		{"NegativeTTL", []string{"serve", "--idempotency-ttl", "-1h", "--db", missingDir}, 2, "--idempotency-ttl must be positive"},
		{"BadMode", []string{"serve", "--idempotency-mode", "eager"}, 2, "want atomic, atomic-deferred or leased"},
		{"ExtraArgument", []string{"migrate", "now"}, 2, `unexpected argument "now"`},
		{"UnknownCommand", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"UsersWithoutCreate", []string{"users"}, 2, "users: a subcommand is required"},
		{"KeysWithoutSubcommand", []string{"keys"}, 2, "keys: a subcommand is required"},
		{"UnknownKeysSubcommand", []string{"keys", "list"}, 2, `keys: unknown subcommand "list"`},
		{"UnreachablePostgresServe", []string{"serve", "--db", "postgres://postgres@127.0.0.1:1/postgres"}, 1, "connect to PostgreSQL at postgres://127.0.0.1:1/postgres"},
		{"UnreachablePostgresMigrate", []string{"migrate", "--db", "postgres://postgres@127.0.0.1:1/postgres"}, 1, "connect to PostgreSQL"},
		{"UnreachablePostgresUsers", []string{"users", "create", "--db", "postgres://postgres@127.0.0.1:1/postgres"}, 1, "connect to PostgreSQL"},
		{"SQLiteInMissingDir", []string{"serve", "--db", missingDir}, 1, "sqlitestore: open"},
		{"MissingRatesFile", []string{"serve", "--rates", filepath.Join(t.TempDir(), "none.json")}, 1, "rates:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCLI(t, env(), c.args...)
			require.Equal(t, c.code, code, "stderr: %s", errOut)
			require.Empty(t, out)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			if c.args[0] == "serve" && c.code == 1 {
				// Past its flags, serve's logger prints the error.
				require.True(t, strings.HasPrefix(errOut, "time="), errOut)
				require.Contains(t, errOut, `level=ERROR msg="paymentsd stopped" err=`)
			} else {
				require.True(t, strings.HasPrefix(errOut, "paymentsd: "), errOut)
			}
			require.Contains(t, errOut, c.says)
			require.NotContains(t, errOut, "slog:")
			require.LessOrEqual(t, strings.Count(errOut, "dial error"), 1, "a dial error is printed once")
		})
	}
	t.Run("DeferredClaimOnSQLite", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "p.db")
		_, errOut, code := runCLI(t, env(), "serve", "--db", db, "--addr", "127.0.0.1:0", "--metrics-addr", "", "--idempotency-mode", "atomic-deferred")
		require.Equal(t, 2, code, "stderr: %s", errOut)
		require.Contains(t, errOut, "mode atomic-deferred needs a store that can defer a claim")
	})
	t.Run("Help", func(t *testing.T) {
		t.Parallel()
		out, _, code := runCLI(t, env(), "help")
		require.Zero(t, code)
		require.Contains(t, out, "paymentsd users create")
		out, _, code = runCLI(t, env(), "serve", "-h")
		require.Zero(t, code)
		for _, flag := range []string{"--addr", "--db", "--idempotency-ttl", "--lease-duration", "--idempotency-mode", "--rates", "--metrics-addr", "--log-format"} {
			require.Contains(t, out, flag)
		}
	})
}

// TestDeprecatedFlag: a flag's old name still sets it, with one warning.
func TestDeprecatedFlag(t *testing.T) {
	t.Parallel()
	_, errOut, code := runCLI(t, env(), "serve", "--lock-timeout", "-1s", "--db", filepath.Join(t.TempDir(), "missing", "x.db"))
	require.Equal(t, 2, code, errOut)
	require.Equal(t, "paymentsd: --lock-timeout is deprecated: use --lease-duration\n"+
		"paymentsd: serve: --lease-duration must be positive, got -1s\n", errOut)
}

// TestRatesFile replaces the built-in rates.
func TestRatesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "rates.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"base":"EUR","rates":{"EUR":"1","USD":"1.25","CHF":"0.95"}}`), 0o600))
	s := startServer(t, newDB(t, "sqlite"), "--rates", good)
	u := s.newUser(t)
	r := u.get(t, "/v1/rates")
	require.JSONEq(t, `{"base":"EUR","rates":{"CHF":"0.95","EUR":"1","USD":"1.25"},"decimals":{"CHF":2,"EUR":2,"USD":2}}`, string(r.body))
	u.deposit(t, "USD", 1000)
	tr := u.post(t, "/v1/transactions", newKey(), `{"source_currency":"USD","target_currency":"CHF","amount":1000}`)
	require.Equal(t, http.StatusCreated, tr.status, "%s", tr)
	require.Equal(t, "0.76", tr.json(t)["rate"]) // 0.95 / 1.25
	require.Equal(t, float64(760), tr.json(t)["converted_amount"])
	r = u.post(t, "/v1/deposits", newKey(), `{"currency":"JPY","amount":1}`)
	require.Equal(t, http.StatusBadRequest, r.status, "JPY is not in the file")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"base":"USD","rates":{"USD":"1","EUR":0.92}}`), 0o600))
	_, errOut, code := runCLI(t, env(), "serve", "--rates", bad, "--db", filepath.Join(dir, "x.db"))
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "a rate must be a JSON string")
}

// TestDemoUser starts paymentsd as a new user would: no flags, no
// DATABASE_URL, in an empty directory. It makes a SQLite file there and a
// demo user, and prints lines that work when pasted into a shell.
func TestDemoUser(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startIn(t, dir, env(), "--addr", "127.0.0.1:0")
	s.db = filepath.Join(dir, "paymentsd.db")
	require.Equal(t, "sqlite", s.store)
	require.FileExists(t, filepath.Join(dir, "paymentsd.db"))
	var export, curl string
	require.Eventually(t, func() bool {
		for line := range strings.Lines(s.stdout.String()) {
			switch {
			case strings.HasPrefix(line, "export API_KEY="):
				export = strings.TrimSpace(line)
			case strings.HasPrefix(line, "curl "):
				curl = strings.TrimSpace(line)
			}
		}
		return export != "" && curl != ""
	}, patience, 10*time.Millisecond, "stdout: %s", s.stdout.String())
	require.Contains(t, curl, s.url)

	// Paste everything it printed, twice: the deposit, then its replay.
	script := s.stdout.String() + "echo; " + curl + "\n"
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, regexp.MustCompile(`(?s)HTTP/1.1 201 Created.*"amount":10000.*HTTP/1.1 201 Created.*Idempotent-Replayed: true`), string(out))

	key := strings.TrimPrefix(export, "export API_KEY=")
	u := &user{s: s, apiKey: key}
	require.Equal(t, map[string]int64{"USD": 10000}, u.balances(t))

	// A restart on the same file makes no second demo user.
	s.stop(t)
	s2 := startIn(t, dir, env(), "--addr", "127.0.0.1:0")
	s2.db = s.db
	u.s = s2
	require.Equal(t, map[string]int64{"USD": 10000}, u.balances(t))
	require.NotContains(t, s2.stdout.String(), "API_KEY")
	require.Equal(t, int64(1), s2.sqlInt(t, `SELECT count(*) FROM users`))
}
