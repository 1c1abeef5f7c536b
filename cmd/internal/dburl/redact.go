package dburl

import (
	"io"
	"regexp"
)

var (
	// userinfoPassword matches the password of a URL's userinfo.
	userinfoPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s"'?#]*:)[^@\s"']*@`)
	// dsnPassword matches the password of a go-sql-driver/mysql DSN.
	dsnPassword = regexp.MustCompile(`(^|[\s"'(=,])([^\s"':@/]+:)[^\s"']*@((?:tcp|tcp4|tcp6|unix)\()`)
	// paramSecret matches a credential-bearing parameter of a URL's query
	// or of a key=value connection string: password=, sslpassword=, …
	paramSecret = regexp.MustCompile(`(?i)((?:^|[?&;\s,"'(])[a-z_]*(?:password|passwd|pwd|secret|token)\s*=\s*)('[^']*'|"[^"]*"|[^&\s;,"')]+)`)
)

// Redact masks, anywhere in s, what looks like a credential of a
// connection string: a URL's userinfo password, a MySQL DSN's password,
// and parameters such as password=, sslpassword=. It is the last net
// under stderr (Writer), for text that names no connection string it
// knows; a connection string is printed through Display, and text about
// one through Scrub.
func Redact(s string) string {
	s = userinfoPassword.ReplaceAllString(s, "${1}"+masked+"@")
	s = dsnPassword.ReplaceAllString(s, "${1}${2}"+masked+"@${3}")
	return paramSecret.ReplaceAllString(s, "${1}"+masked)
}

// Writer returns a writer that writes to w what it is given, redacted. A
// log handler writes each line in one call, so a line is redacted whole.
func Writer(w io.Writer) io.Writer { return redacting{w} }

type redacting struct{ w io.Writer }

func (r redacting) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
