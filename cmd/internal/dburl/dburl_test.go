package dburl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/internal/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]dburl.DB{
		"postgres://u:p@127.0.0.1:5432/db?sslmode=disable":          {Kind: dburl.Postgres, DSN: "postgres://u:p@127.0.0.1:5432/db?sslmode=disable"},
		"postgresql://u@h1:5432,h2:5433/db?target_session_attrs=rw": {Kind: dburl.Postgres, DSN: "postgresql://u@h1:5432,h2:5433/db?target_session_attrs=rw"},
		"mysql://root@127.0.0.1:3306/idem":                          {Kind: dburl.MySQL, DSN: "mysql://root@127.0.0.1:3306/idem"},
		"u@tcp(127.0.0.1:3306)/db":                                  {Kind: dburl.MySQL, DSN: "u@tcp(127.0.0.1:3306)/db"},
		"u:p@ss@tcp(127.0.0.1:3306)/db?parseTime=true":              {Kind: dburl.MySQL, DSN: "u:p@ss@tcp(127.0.0.1:3306)/db?parseTime=true"},
		"root@unix(/run/mysqld/mysqld.sock)/db":                     {Kind: dburl.MySQL, DSN: "root@unix(/run/mysqld/mysqld.sock)/db"},
		"keys.db":                                                   {Kind: dburl.SQLite, DSN: "keys.db"},
		"/var/lib/idem/keys.db":                                     {Kind: dburl.SQLite, DSN: "/var/lib/idem/keys.db"},
		"sqlite:keys.db":                                            {Kind: dburl.SQLite, DSN: "keys.db"},
		"sqlite:///var/lib/keys.db":                                 {Kind: dburl.SQLite, DSN: "/var/lib/keys.db"},
	} {
		got, err := dburl.Parse(in, "--db")
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"host=127.0.0.1 user=postgres password=s3cret dbname=x",
		"file:x.db", "redis://h:6379", "sqlserver://u:s3cret@h/db", "postgres:///db", "mysql://u:s3cret@/db",
		"sqlite:", "sqlite:x.db?mode=ro", " ",
	} {
		_, err := dburl.Parse(in, "--db")
		var e *dburl.Error
		require.True(t, errors.As(err, &e), "%q: %v", in, err)
		require.NotContains(t, err.Error(), "s3cret")
		require.NotContains(t, err.Error(), "\n")
		require.Contains(t, err.Error(), "--db")
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "DATABASE_URL" {
				return v
			}
			return ""
		}
	}
	db, err := dburl.Resolve("", env(""), "default.db")
	require.NoError(t, err)
	require.Equal(t, dburl.DB{Kind: dburl.SQLite, DSN: "default.db"}, db)
	db, err = dburl.Resolve("", env("mysql://root@h/db"), "default.db")
	require.NoError(t, err)
	require.Equal(t, dburl.MySQL, db.Kind)
	db, err = dburl.Resolve("x.db", env("mysql://root@h/db"), "default.db")
	require.NoError(t, err)
	require.Equal(t, dburl.SQLite, db.Kind, "--db wins over $DATABASE_URL")
	_, err = dburl.Resolve("", env("dbname=x password=s3cret"), "default.db")
	require.ErrorContains(t, err, "$DATABASE_URL")
	require.NotContains(t, err.Error(), "s3cret")
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"postgres://u:s3cret@h:5432/db",
		"postgres://u:s3cret@h1:5432,h2:5432/db",
		"postgres://u@h/db?sslmode=verify-full&sslpassword=s3cret&x=1",
		"postgres://u@h/db?password=s3cret",
		"connect to PostgreSQL at postgres://u@h/db?PASSWORD=s3cret: refused",
		"mysql://u:s3cret@h:3306/db",
		"mysql://u@h:3306/db?password=s3cret",
		"u:s3cret@tcp(127.0.0.1:3306)/db",
		`err="dial u:s3cret@tcp(h:3306)/db"`,
		"host=h user=u password=s3cret dbname=x",
		"host=h password='s3 cret' dbname=x",
	} {
		out := dburl.Redact(in)
		require.NotContains(t, out, "s3", in)
		require.Contains(t, out, "xxxxx", in)
	}
	require.Equal(t, "postgres://u@h:5432/db?sslmode=disable", dburl.Redact("postgres://u@h:5432/db?sslmode=disable"))
	require.Equal(t, "u@tcp(h:3306)/db", dburl.Redact("u@tcp(h:3306)/db"))

	var b strings.Builder
	n, err := dburl.Writer(&b).Write([]byte("msg=ready db=postgres://u:s3cret@h/db\n"))
	require.NoError(t, err)
	require.Equal(t, len("msg=ready db=postgres://u:s3cret@h/db\n"), n)
	require.Equal(t, "msg=ready db=postgres://u:xxxxx@h/db\n", b.String())
}
