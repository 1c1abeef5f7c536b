package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

const consoleToken = "gateway-console-admin-token-0123"

// consoleGateway is a gateway with its console on, and one key whose
// upstream outcome is unknown (k-unknown, of Bearer alice).
type consoleGateway struct {
	*gatewayProc
	db, console, scope string
}

var consoleURL = regexp.MustCompile(`msg="operator console" url=(http://\S+)`)

func startConsoleGateway(t *testing.T) *consoleGateway {
	t.Helper()
	up := startUpstream(t)
	db := keyDBs["SQLite"].new(t)
	gw := startGatewayWith(t, "--upstream", up.url, "--upstream-timeout", "1m", "--db", db,
		"--metrics-addr", "127.0.0.1:0", "--console-token-file", writeFile(t, "console-token", consoleToken))
	m := consoleURL.FindStringSubmatch(gw.stderr.String())
	require.NotNil(t, m, gw.stderr.String())
	require.Equal(t, 409, post(t, gw.url, "/die", "Bearer alice", "k-unknown").status)
	sum := sha256.Sum256([]byte("Bearer alice"))
	return &consoleGateway{gatewayProc: gw, db: db, console: m[1], scope: hex.EncodeToString(sum[:])}
}

// consoleClient sends requests to the console from a local address (an
// address of the loopback network), never following a redirect.
func consoleClient(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type consoleReply struct {
	status int
	header http.Header
	body   string
}

func consoleDo(t *testing.T, c *http.Client, method, u, cookie string, body io.Reader) consoleReply {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return consoleReply{resp.StatusCode, resp.Header, string(b)}
}

func signInWith(t *testing.T, c *http.Client, consoleURL, token string) consoleReply {
	t.Helper()
	return consoleDo(t, c, "POST", consoleURL+"login", "", strings.NewReader(url.Values{"name": {"carol"}, "token": {token}}.Encode()))
}

// signedIn signs in from 127.0.0.1 and returns the session cookie.
func (g *consoleGateway) signedIn(t *testing.T) string {
	t.Helper()
	r := signInWith(t, consoleClient("127.0.0.1"), g.console, consoleToken)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	ck := strings.Split(r.header.Get("Set-Cookie"), ";")[0]
	require.NotEqual(t, "", ck)
	return ck
}

// form is k-unknown's action form, as its page shows it, with fields.
func (g *consoleGateway) form(t *testing.T, cookie string, fields url.Values) url.Values {
	t.Helper()
	page := consoleDo(t, consoleClient("127.0.0.1"), "GET", g.console+"key?"+url.Values{"scope": {g.scope}, "key": {"k-unknown"}}.Encode(), cookie, nil)
	require.Equal(t, http.StatusOK, page.status)
	v := url.Values{"scope": {g.scope}, "key": {"k-unknown"}, "confirm": {"yes"}}
	for _, f := range []string{"csrf", "token"} {
		m := regexp.MustCompile(`name="` + f + `" value="([^"]+)"`).FindStringSubmatch(page.body)
		require.NotNil(t, m, "no %s on the record page", f)
		v.Set(f, m[1])
	}
	for k, vs := range fields {
		v[k] = vs
	}
	return v
}

// stillUnknown checks that k-unknown still holds its unknown outcome.
func (g *consoleGateway) stillUnknown(t *testing.T) {
	t.Helper()
	out, stderr, code := gatewayCmd(t, "", "keys", "show", "--db", g.db, "--scope", g.scope, "--key", "k-unknown")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"outcome_unknown":true`)
	r := post(t, g.url, "/die", "Bearer alice", "k-unknown")
	require.Equal(t, 409, r.status, "every retry still gets the unknown outcome")
	require.True(t, r.replayed)
}

// TestConsoleAndCLIRefuseInvalidAnswers: the console's "Record the real
// answer" and keys resolve refuse, with the same checks, a header value
// with CR/LF, a Content-Type that is no media type, a Location with a
// scheme a browser would run, another header, a non-final status and a
// reason over 500 characters; a form over 1 MiB is a 413, not a CSRF
// refusal. Nothing changes.
func TestConsoleAndCLIRefuseInvalidAnswers(t *testing.T) {
	t.Parallel()
	g := startConsoleGateway(t)
	cookie := g.signedIn(t)
	c := consoleClient("127.0.0.1")
	answer := func(status, contentType, location, reason string) url.Values {
		return url.Values{"status": {status}, "content_type": {contentType}, "location": {location}, "body": {`{"id":"o-1"}`}, "reason": {reason}}
	}
	long := strings.Repeat("x", 501)
	for name, f := range map[string]struct {
		form url.Values
		want string
	}{
		"ContentTypeCRLF":    {answer("201", "text/html\r\nSet-Cookie: a=b", "", "INC-1"), "control character"},
		"ContentTypeInvalid": {answer("201", "text/html; charset", "", "INC-1"), "not a media type"},
		"LocationJavaScript": {answer("201", "application/json", "javascript:alert(1)", "INC-1"), "not the scheme"},
		"LocationLF":         {answer("201", "application/json", "/v1/orders/1\nRefresh: 0", "INC-1"), "control character"},
		"Status302":          {answer("302", "application/json", "/v1/orders/1", "INC-1"), "want a final answer"},
		"ReasonTooLong":      {answer("201", "application/json", "", long), "more than 500"},
	} {
		t.Run("Console"+name, func(t *testing.T) {
			r := consoleDo(t, c, "POST", g.console+"key/answer", cookie, strings.NewReader(g.form(t, cookie, f.form).Encode()))
			require.Equal(t, http.StatusBadRequest, r.status, r.body)
			require.Contains(t, r.body, f.want)
			require.Contains(t, r.body, "Nothing changed")
		})
	}
	t.Run("ConsoleReopenReasonTooLong", func(t *testing.T) {
		// key/release is key/reopen's deprecated path: the same action.
		for _, path := range []string{"key/reopen", "key/release"} {
			r := consoleDo(t, c, "POST", g.console+path, cookie, strings.NewReader(g.form(t, cookie, url.Values{"reason": {long}}).Encode()))
			require.Equal(t, http.StatusBadRequest, r.status, r.body)
			require.Contains(t, r.body, "more than 500", path)
		}
	})
	t.Run("ConsoleFormTooLarge", func(t *testing.T) {
		v := g.form(t, cookie, answer("201", "application/json", "", "INC-1"))
		v.Set("body", strings.Repeat("a", 1<<20))
		r := consoleDo(t, c, "POST", g.console+"key/answer", cookie, strings.NewReader(v.Encode()))
		require.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.body)
		require.NotContains(t, r.body, "CSRF")
	})
	g.stillUnknown(t)

	resolve := func(stdin string, args ...string) (string, int) {
		_, stderr, code := gatewayCmd(t, stdin, append([]string{"keys", "resolve", "--db", g.db, "--scope", g.scope, "--key", "k-unknown"}, args...)...)
		return stderr, code
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"ContentTypeCRLF":    {[]string{"--status", "201", "--body-file", "-", "--content-type", "text/html\r\nSet-Cookie: a=b", "--reason", "INC-1"}, "control character"},
		"ContentTypeInvalid": {[]string{"--status", "201", "--body-file", "-", "--content-type", "text/html; charset", "--reason", "INC-1"}, "not a media type"},
		"LocationJavaScript": {[]string{"--status", "201", "--location", "JavaScript:alert(1)", "--reason", "INC-1"}, "not the scheme"},
		"Status302":          {[]string{"--status", "302", "--reason", "INC-1"}, "want a final answer"},
		"ReasonTooLong":      {[]string{"--reopen", "--reason", long}, "more than 500"},
		"ReasonMissing":      {[]string{"--reopen"}, "a reason is required"},
	} {
		t.Run("CLI"+name, func(t *testing.T) {
			stderr, code := resolve(`{"id":"o-1"}`, c.args...)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, c.want)
		})
	}
	g.stillUnknown(t)

	// The same answer, valid, is recorded: 500 characters of reason pass.
	r := consoleDo(t, c, "POST", g.console+"key/answer", cookie, strings.NewReader(g.form(t, cookie,
		answer("201", "application/json", "/v1/orders/o-1", strings.Repeat("é", 500))).Encode()))
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, reply{201, `{"id":"o-1"}`, true}, post(t, g.url, "/die", "Bearer alice", "k-unknown"))
}

// TestConsoleSignInThrottled: failed sign-ins from one address past the
// limit get 429 with Retry-After, even with the right token; a sign-in
// from another address still works; every sign-in, failed sign-in,
// throttled sign-in and CSRF refusal is logged, without the token.
func TestConsoleSignInThrottled(t *testing.T) {
	t.Parallel()
	g := startConsoleGateway(t)
	attacker := consoleClient("127.0.0.1")
	for i := range 5 {
		r := signInWith(t, attacker, g.console, "wrong-token-guess-"+string(rune('a'+i)))
		require.Equal(t, http.StatusUnauthorized, r.status, "attempt %d", i+1)
	}
	r := signInWith(t, attacker, g.console, "wrong-token-guess-f")
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.NotEqual(t, "", r.header.Get("Retry-After"))
	r = signInWith(t, attacker, g.console, consoleToken)
	require.Equal(t, http.StatusTooManyRequests, r.status, "throttled before the token is compared")

	other := consoleClient("127.0.0.2")
	r = signInWith(t, other, g.console, consoleToken)
	require.Equal(t, http.StatusSeeOther, r.status, "another address signs in: %s", r.body)
	cookie := strings.Split(r.header.Get("Set-Cookie"), ";")[0]
	r = consoleDo(t, other, "POST", g.console+"key/reopen", cookie, strings.NewReader(url.Values{"csrf": {"forged"}, "reason": {"x"}, "confirm": {"yes"}}.Encode()))
	require.Equal(t, http.StatusForbidden, r.status)

	logs := ""
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if logs = g.stderr.String(); strings.Contains(logs, "bad CSRF token") {
			break
		}
		time.Sleep(10 * time.Millisecond) // poll: the log reaches the pipe after the answer
	}
	require.Equal(t, 5, strings.Count(logs, `msg="console: sign-in refused" remote=127.0.0.1:`), logs)
	require.Equal(t, 2, strings.Count(logs, `msg="console: sign-in throttled" remote=127.0.0.1:`), logs)
	require.Contains(t, logs, `msg="console: signed in" operator=carol remote=127.0.0.2:`)
	require.Contains(t, logs, `msg="console: refused: bad CSRF token or origin" path=/key/reopen operator=carol remote=127.0.0.2:`)
	require.NotContains(t, logs, consoleToken)
	require.NotContains(t, logs, "wrong-token-guess")
}

// TestUnknownOutcomeForOperators: for the person who resolves an unknown
// outcome, keys list, keys show and the console name the key forwarded
// upstream, the upstream, and why the outcome is unknown (a timeout, a
// connection closed before an answer), recorded where it became unknown;
// the request log says outcome=unknown; the console links the runbook and
// shows no unfinished operations, which the gateway never has.
func TestUnknownOutcomeForOperators(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	db := keyDBs["SQLite"].new(t)
	config := writeFile(t, "gateway.yaml", "upstreams:\n  - name: python\n    url: "+up.url+
		"\n    prefix: /\ndefaults:\n  upstream_timeout: 500ms\nroutes:\n  - match: POST /*\n    key: required\n")
	gw := startGatewayWith(t, "--config", config, "--db", db,
		"--metrics-addr", "127.0.0.1:0", "--console-token-file", writeFile(t, "console-token", consoleToken))
	require.Equal(t, 409, post(t, gw.url, "/die", "Bearer alice", "k-reset").status)
	require.Equal(t, 409, post(t, gw.url, "/slow", "Bearer alice", "k-timeout").status)
	sum := sha256.Sum256([]byte("Bearer alice"))
	scope := hex.EncodeToString(sum[:])
	forwarded := func(key string) string {
		sum := sha256.Sum256([]byte("idem-gateway\x00" + scope + "\x00" + key))
		return hex.EncodeToString(sum[:16])
	}
	want := map[string]string{"k-reset": "reset", "k-timeout": "timeout"}

	out, stderr, code := gatewayCmd(t, "", "keys", "list", "--config", config, "--db", db)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	for _, line := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		key := m["key"].(string)
		require.Equal(t, forwarded(key), m["forwarded_key"], line)
		require.Equal(t, "python", m["upstream"], line)
		require.Equal(t, want[key], m["cause"], line)
	}
	out, stderr, code = gatewayCmd(t, "", "keys", "show", "--config", config, "--db", db, "--scope", scope, "--key", "k-timeout")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"forwarded_key":"`+forwarded("k-timeout")+`","upstream":"python","cause":"timeout"`)

	logs := gw.stderr.String()
	require.Equal(t, 2, strings.Count(logs, "msg=request route=\"POST /*\" outcome=unknown status=409"), logs)
	require.NotContains(t, logs, "outcome=executed status=409")

	m := consoleURL.FindStringSubmatch(logs)
	require.NotNil(t, m, logs)
	c := consoleClient("127.0.0.1")
	r := signInWith(t, c, m[1], consoleToken)
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	cookie := strings.Split(r.header.Get("Set-Cookie"), ";")[0]
	runbook := `href="https://github.com/idem-dev/idem/blob/main/docs/operations.md#runbook-unknown-outcomes"`

	page := consoleDo(t, c, "GET", m[1]+"key?"+url.Values{"scope": {scope}, "key": {"k-timeout"}}.Encode(), cookie, nil)
	require.Equal(t, http.StatusOK, page.status)
	for _, s := range []string{"Forwarded key", forwarded("k-timeout"), "python", "timeout: the upstream sent no answer", runbook, `id="completed-at">Stored 20`} {
		require.Contains(t, page.body, s)
	}
	require.NotContains(t, page.body, "Recovery point", "the gateway keeps none")

	overview := consoleDo(t, c, "GET", m[1], cookie, nil)
	require.Equal(t, http.StatusOK, overview.status)
	require.Contains(t, overview.body, `id="unknown"`)
	require.Contains(t, overview.body, runbook)
	require.NotContains(t, overview.body, "Unfinished operations")
	require.NotContains(t, overview.body, "<th>Point</th>")
}
