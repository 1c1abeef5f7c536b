package dburl

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Display is a connection string as it may be printed: its scheme, hosts,
// ports and database name, and nothing else (no user, password, query or
// parameter), whatever the form: a URL (postgres://, mysql://, amqp://,
// nats://, several nats:// URLs joined by commas), a go-sql-driver/mysql
// DSN, a libpq key=value string or a SQLite path. It is the one way a
// connection string reaches a log line or an error. A string it cannot
// read with certainty, such as a password with an unencoded "/", is shown
// as its scheme alone: nothing that might be a secret is guessed at.
func Display(conn string) string {
	switch {
	case urlScheme.MatchString(conn):
		return displayURLs(conn)
	case mysqlDSN.MatchString(conn):
		return displayMySQL(conn)
	case conninfo.MatchString(conn):
		return displayConninfo(conn)
	case strings.HasPrefix(conn, "sqlite:"):
		return "sqlite:" + displayPath(strings.TrimPrefix(conn, "sqlite:"))
	}
	return displayPath(conn)
}

// unreadable stands for what Display cannot show with certainty.
const unreadable = "(not shown)"

var (
	// urlScheme matches a URL with an authority: scheme://.
	urlScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://`)
	// nextURL matches where a comma-separated list's next URL starts.
	nextURL = regexp.MustCompile(`,[a-zA-Z][a-zA-Z0-9+.-]*://`)
	// safeHosts and safeName are what Display shows of hosts and of a
	// database name or path: no quote, space, "@" or anything a password
	// could hide in unseen.
	safeHosts = regexp.MustCompile(`^[A-Za-z0-9._\-:\[\],%]*$`)
	safeName  = regexp.MustCompile(`^[A-Za-z0-9._\-/~+%]*$`)
)

// displayURLs shows each URL of a comma-separated list.
func displayURLs(conn string) string {
	starts := nextURL.FindAllStringIndex(conn, -1)
	var out []string
	from := 0
	for _, s := range starts {
		out = append(out, displayURL(conn[from:s[0]]))
		from = s[0] + 1
	}
	return strings.Join(append(out, displayURL(conn[from:])), ",")
}

// displayURL shows one URL's scheme, hosts and first path segment (the
// database, or a RabbitMQ virtual host), as net/url reads it, the way the
// drivers read it. Anything after the authority that holds an "@" means a
// userinfo the parser did not see whole (an unencoded "/", "?" or "#" in a
// password): only the scheme is shown.
func displayURL(s string) string {
	scheme, rest, _ := strings.Cut(s, "://")
	shown := scheme + "://"
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		return shown + unreadable
	}
	authority, after, _ := strings.Cut(rest, "/")
	if i := strings.IndexAny(authority, "?#"); i >= 0 {
		after = authority[i:] + after
	}
	if strings.Contains(after, "@") || !safeHosts.MatchString(u.Host) {
		return shown + unreadable
	}
	shown += u.Host
	db, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if db != "" {
		if !safeName.MatchString(db) {
			return shown + "/" + unreadable
		}
		shown += "/" + db
	}
	return shown
}

// displayMySQL shows a go-sql-driver/mysql DSN's network address and
// database, split as the driver splits it: the database after the last
// "/", the address after the last "@" before it.
func displayMySQL(dsn string) string {
	slash := strings.LastIndex(dsn, "/")
	addr := dsn[:slash]
	if at := strings.LastIndex(addr, "@"); at >= 0 {
		addr = addr[at+1:]
	}
	db, _, _ := strings.Cut(dsn[slash+1:], "?")
	m := mysqlAddr.FindStringSubmatch(addr)
	if m == nil || !safeHosts.MatchString(m[2]) && !safeName.MatchString(m[2]) {
		return unreadable
	}
	if !safeName.MatchString(db) {
		db = unreadable
	}
	return m[1] + "(" + m[2] + ")/" + db
}

var mysqlAddr = regexp.MustCompile(`^(tcp|tcp4|tcp6|unix)\(([^()]*)\)$`)

// displayConninfo shows a libpq key=value string's host, hostaddr, port
// and dbname, read with libpq's quoting rules; a string it cannot read
// whole is not shown.
func displayConninfo(s string) string {
	pairs, ok := conninfoPairs(s)
	if !ok {
		return unreadable
	}
	var out []string
	for _, kv := range pairs {
		key, value := kv[0], kv[1]
		switch key {
		case "host", "hostaddr", "port":
			if !safeHosts.MatchString(value) {
				value = unreadable
			}
		case "dbname":
			if !safeName.MatchString(value) {
				value = unreadable
			}
		default:
			continue
		}
		out = append(out, key+"="+value)
	}
	return strings.Join(out, " ")
}

// conninfoPairs reads a libpq key=value string: false if it cannot be
// read whole.
func conninfoPairs(s string) (pairs [][2]string, ok bool) {
	for s = strings.TrimLeft(s, " \t\n\r\f\v"); s != ""; s = strings.TrimLeft(s, " \t\n\r\f\v") {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, false
		}
		key := strings.TrimSpace(s[:eq])
		var value string
		if value, s, ok = conninfoValue(strings.TrimLeft(s[eq+1:], " \t\n\r\f\v")); !ok {
			return nil, false
		}
		pairs = append(pairs, [2]string{key, value})
	}
	return pairs, true
}

// conninfoValue reads one value of a key=value string: quoted in '…' with
// \ escapes, or bare up to white space.
func conninfoValue(s string) (value, rest string, ok bool) {
	if !strings.HasPrefix(s, "'") {
		end := strings.IndexAny(s, " \t\n\r\f\v")
		if end < 0 {
			end = len(s)
		}
		return strings.ReplaceAll(s[:end], `\`, ""), s[end:], true
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i < len(s) {
				b.WriteByte(s[i])
			}
		case '\'':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false // an unterminated quote
}

// displayPath shows a file path unless it holds what only a mistyped URL
// or DSN would ("@", a query): then it might hold a password.
func displayPath(p string) string {
	if strings.ContainsAny(p, "@?#") || strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return unreadable
	}
	return p
}

// Scrub is text a driver or library returned about conn (an error, which
// may quote conn whole or in part) made printable: conn itself becomes
// Display(conn), and every spelling of its secrets (the password of a
// URL's userinfo, of a DSN, of any parameter whose name, decoded, names a
// password or secret: raw, percent-decoded, escaped, Go-quoted) is masked,
// as is every part of one four bytes long or more, and a quoted fragment
// of one. Text that would still show a part of a secret is replaced by
// Display(conn) alone.
func Scrub(text, conn string) string {
	if conn == "" {
		return text
	}
	shown := Display(conn)
	if len(text) > maxScrub || len(conn) > maxScrub {
		return shown + ": " + unreadable // masking parts is quadratic: beyond any real message
	}
	text = strings.ReplaceAll(text, conn, shown)
	secrets := secretsOf(conn)
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, masked)
	}
	text = quotedFragment.ReplaceAllStringFunc(text, func(q string) string {
		inner := q[1 : len(q)-1]
		for _, s := range secrets {
			if inner != "" && strings.Contains(s, inner) {
				return q[:1] + masked + q[len(q)-1:]
			}
		}
		return q
	})
	text = maskParts(text, secrets, shown)
	if Leaks(text, conn) {
		return shown + ": " + unreadable
	}
	return text
}

// maxScrub bounds the text and the connection string Scrub reads.
const maxScrub = 8 << 10

// part is the length of the shortest part of a secret Scrub masks.
const part = 4

// parts is the set of the parts, part bytes long, of secrets that shown
// does not show.
func parts(secrets []string, shown string) map[string]bool {
	set := map[string]bool{}
	for _, s := range secrets {
		for i := 0; i+part <= len(s); i++ {
			set[s[i:i+part]] = true
		}
	}
	for i := 0; i+part <= len(shown); i++ {
		delete(set, shown[i:i+part])
	}
	return set
}

// maskParts masks every run of text made of parts of a secret part bytes
// long that shown does not show, one mask a run.
func maskParts(text string, secrets []string, shown string) string {
	set := parts(secrets, shown)
	covered := make([]bool, len(text))
	for i := 0; i+part <= len(text); i++ {
		if set[text[i:i+part]] {
			for j := i; j < i+part; j++ {
				covered[j] = true
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		switch {
		case !covered[i]:
			b.WriteByte(text[i])
		case i == 0 || !covered[i-1]:
			b.WriteString(masked)
		}
	}
	return b.String()
}

// Leaks reports whether text shows a secret of conn, or a part of one
// (part bytes or more; a secret shorter than that whole), that
// Display(conn) does not show itself (a password may repeat a host name).
func Leaks(text, conn string) bool {
	shown := Display(conn)
	secrets := secretsOf(conn)
	for _, s := range secrets {
		if len(s) < part && strings.Contains(text, s) && !strings.Contains(shown, s) {
			return true
		}
	}
	set := parts(secrets, shown)
	for i := 0; i+part <= len(text); i++ {
		if set[text[i:i+part]] {
			return true
		}
	}
	return false
}

// ScrubError is err with its text scrubbed of conn's secrets (Scrub);
// errors.Is and errors.As still see err.
func ScrubError(err error, conn string) error {
	if err == nil {
		return nil
	}
	return &scrubbed{err: err, text: Scrub(err.Error(), conn)}
}

type scrubbed struct {
	err  error
	text string
}

func (e *scrubbed) Error() string { return e.text }
func (e *scrubbed) Unwrap() error { return e.err }

// masked replaces every credential Scrub and Redact hide.
const masked = "xxxxx"

// quotedFragment matches a fragment quoted as drivers and Go quote them.
var quotedFragment = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`|'[^']*'")

// secretsOf returns every spelling of every secret conn holds, longest
// first, so that a longer spelling is masked before a part of it.
func secretsOf(conn string) []string {
	var raw []string
	// A URL's or DSN's userinfo password, read as a driver would read it
	// and as a careless one might: up to the last "@" before the host.
	userinfo := func(s string) {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(s[:at], ":"); ok {
				raw = append(raw, pw)
			}
		}
	}
	switch {
	case urlScheme.MatchString(conn):
		from := 0
		for _, s := range append(nextURL.FindAllStringIndex(conn, -1), []int{len(conn), len(conn)}) {
			_, rest, _ := strings.Cut(conn[from:s[0]], "://")
			userinfo(rest)
			from = s[0] + 1
		}
	case mysqlDSN.MatchString(conn):
		userinfo(conn[:strings.LastIndex(conn, "/")])
	default: // a path, or what was meant as a URL without its scheme
		userinfo(conn)
	}
	// Parameters whose name, decoded, names a secret: of a query, the
	// value up to the next parameter and, for a careless "&" in it, up to
	// the end; of a key=value string, as libpq reads it, or, if it cannot,
	// up to white space and up to the end.
	secret := func(name, value, rest string) {
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if secretName.MatchString(name) {
			raw = append(raw, value, rest)
		}
	}
	for _, m := range queryPair.FindAllStringSubmatchIndex(conn, -1) {
		secret(conn[m[2]:m[3]], conn[m[4]:m[5]], conn[m[4]:])
	}
	if conninfo.MatchString(conn) {
		pairs, ok := conninfoPairs(conn)
		for _, kv := range pairs {
			secret(kv[0], kv[1], kv[1])
		}
		if !ok {
			for _, m := range conninfoPair.FindAllStringSubmatchIndex(conn, -1) {
				secret(conn[m[2]:m[3]], conn[m[4]:m[5]], conn[m[4]:])
			}
		}
	}
	var out []string
	for _, s := range raw {
		if s == "" {
			continue
		}
		out = append(out, s, url.QueryEscape(s), url.PathEscape(s), strings.Trim(strconv.Quote(s), `"`))
		if d, err := url.QueryUnescape(s); err == nil {
			out = append(out, d, strings.Trim(strconv.Quote(d), `"`))
		}
		if d, err := url.PathUnescape(s); err == nil {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

var (
	// queryPair matches name=value in a URL's or a DSN's query.
	queryPair = regexp.MustCompile(`[?&;]([^=?&;#]+)=([^&;]*)`)
	// conninfoPair matches name=value in a key=value string libpq could
	// not read: the value up to white space.
	conninfoPair = regexp.MustCompile(`(?:^|\s)([^=\s]+)\s*=\s*(\S*)`)
	// secretName matches a parameter that holds a credential.
	secretName = regexp.MustCompile(`(?i)pass|pwd|secret|token|key`)
)
