package dburl_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/internal/require"
)

// hostile are passwords that broke the regular expressions Display
// replaces: quotes, white space, an unencoded "@" or ":", an encoded
// parameter name.
var hostile = []string{`it's`, `say "hi"`, "two words", "tab\there", "p@ss", "a:b", "p@ss:w@rd", "/slash", "q?x=1", "h#sh", "100%", "%zz"}

func TestDisplay(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:s3cret@h:5432/db?sslmode=disable&password=s3cret": "postgres://h:5432/db",
		"postgresql://u@h1:5432,h2:5433/db?target_session_attrs=rw":     "postgresql://h1:5432,h2:5433/db",
		"postgres://u:p@ss@h/db":                              "postgres://h/db",
		"postgres://u:12/b@h/db":                              "postgres://(not shown)",
		"postgres://h/db?pass%77ord=s3cret":                   "postgres://h/db",
		"postgres://[::1]:5432/db":                            "postgres://[::1]:5432/db",
		"mysql://u:s3cret@h:3306/idem?parseTime=true":         "mysql://h:3306/idem",
		"u:s3c@ret@tcp(127.0.0.1:3306)/db?parseTime=true":     "tcp(127.0.0.1:3306)/db",
		"u:a/b@unix(/run/mysqld/mysqld.sock)/db":              "unix(/run/mysqld/mysqld.sock)/db",
		"host=h port=5432 user=u password='s3 cret' dbname=x": "host=h port=5432 dbname=x",
		"host=h password='unterminated dbname=x":              "(not shown)",
		"amqp://guest:s3cret@rabbit:5672/vhost":               "amqp://rabbit:5672/vhost",
		"nats://u:s3cret@n1:4222,nats://u:s3cret@n2:4222":     "nats://n1:4222,nats://n2:4222",
		"/var/lib/idem/keys.db":                               "/var/lib/idem/keys.db",
		"sqlite:keys.db":                                      "sqlite:keys.db",
		"u:s3cret@h/db":                                       "(not shown)",
	} {
		require.Equal(t, want, dburl.Display(in), in)
	}
}

// TestScrubHostile: every hostile password, in every form, is absent
// from what Scrub makes of a text quoting the connection string as Go
// quotes it, in part or whole.
func TestScrubHostile(t *testing.T) {
	t.Parallel()
	for _, pw := range hostile {
		for _, conn := range forms("u", pw, "h", "5432", "db") {
			text := fmt.Sprintf("cannot parse %q: failed near %q (`%s`)", conn, pw, conn)
			out := dburl.Scrub(text, conn.dsn)
			g, shows := showsPart(out, pw, dburl.Display(conn.dsn))
			require.False(t, shows, "%q of %q in %q: %q", g, pw, conn.dsn, out)
		}
	}
}

// form is a connection string and what Display must make of it: want
// when it is well-formed, else at most one of fallbacks.
type form struct {
	dsn       string
	want      string
	fallbacks []string
	encoded   bool // the password is percent-encoded: Display must give want
}

func (f form) String() string { return f.dsn }

// forms are the connection strings of every kind with user, password,
// host, port and database, the password as given and percent-encoded.
func forms(user, pw, host, port, db string) []form {
	var out []form
	for _, scheme := range []string{"postgres", "mysql", "amqp", "nats"} {
		want := scheme + "://" + host + ":" + port + "/" + db
		fb := []string{scheme + "://(not shown)", scheme + "://" + host + ":" + port + "/(not shown)"}
		u := url.URL{Scheme: scheme, User: url.UserPassword(user, pw), Host: host + ":" + port, Path: "/" + db}
		out = append(out,
			form{dsn: u.String(), want: want, encoded: true},
			form{dsn: scheme + "://" + user + ":" + pw + "@" + host + ":" + port + "/" + db, want: want, fallbacks: fb},
			form{dsn: scheme + "://" + user + "@" + host + ":" + port + "/" + db + "?pass%77ord=" + url.QueryEscape(pw), want: want, encoded: true},
			form{dsn: scheme + "://" + user + "@" + host + ":" + port + "/" + db + "?password=" + pw, want: want, fallbacks: fb})
	}
	want := "tcp(" + host + ":" + port + ")/" + db
	out = append(out, form{dsn: user + ":" + pw + "@tcp(" + host + ":" + port + ")/" + db + "?parseTime=true", want: want,
		fallbacks: []string{"(not shown)", "tcp(" + host + ":" + port + ")/(not shown)"}})
	quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'"
	out = append(out, form{dsn: "host=" + host + " port=" + port + " password=" + quoted + " dbname=" + db,
		want: "host=" + host + " port=" + port + " dbname=" + db, encoded: true})
	return out
}

// FuzzDisplay: whatever the password, Display shows exactly the scheme,
// host, port and database, or less; never a byte of the password.
func FuzzDisplay(f *testing.F) {
	for _, pw := range hostile {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		for _, c := range forms("who", pw, "db1.example", "5432", "payments") {
			got := dburl.Display(c.dsn)
			if got == c.want || !c.encoded && contains(c.fallbacks, got) {
				continue
			}
			t.Fatalf("Display(%q) = %q, want %q", c.dsn, got, c.want)
		}
	})
}

// FuzzScrub: whatever the password, text quoting the connection string,
// as Go's %q, %s and url.Error do, keeps no part of it once scrubbed.
func FuzzScrub(f *testing.F) {
	for _, pw := range hostile {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		for _, c := range forms("who", pw, "db1.example", "5432", "payments") {
			_, perr := url.Parse(c.dsn)
			text := fmt.Sprintf("connect to %s failed: %v; dsn %q, password %q, `%s`", c.dsn, perr, c.dsn, pw, pw)
			out := dburl.Scrub(text, c.dsn)
			if g, ok := showsPart(out, pw, dburl.Display(c.dsn)); ok || dburl.Leaks(out, c.dsn) {
				t.Fatalf("Scrub of %q shows %q of the password %q: %q", c.dsn, g, pw, out)
			}
		}
	})
}

// showsPart returns a part of pw (four bytes, or pw whole when shorter)
// that out shows and shown, what Display shows, does not.
func showsPart(out, pw, shown string) (string, bool) {
	if pw == "" {
		return "", false
	}
	if len(pw) < 4 {
		return pw, strings.Contains(out, pw) && !strings.Contains(shown, pw)
	}
	grams := func(s string) map[string]bool {
		set := map[string]bool{}
		for i := 0; i+4 <= len(s); i++ {
			set[s[i:i+4]] = true
		}
		return set
	}
	inOut, inShown := grams(out), grams(shown)
	for i := 0; i+4 <= len(pw); i++ {
		if g := pw[i : i+4]; inOut[g] && !inShown[g] {
			return g, true
		}
	}
	return "", false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
