package main_test

// The gateway fails closed at its edges: whatever the spelling of a
// request line, one key runs a lenient upstream at most once, an unsafe
// request no route matches is refused, an unguarded request never carries
// the client's key, and a scope is a credential's. The upstream here reads
// requests as the lenient frameworks do (Werkzeug upper-cases the method;
// many collapse //, resolve .., decode %2F, ignore case, a trailing slash
// and ;parameters) and counts what it runs.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// lenientUpstream runs every request it gets, reading it as a lenient
// framework would, and records what it ran.
type lenientUpstream struct {
	url string
	mu  sync.Mutex
	ran map[string]int    // by method and resource, as the upstream reads them
	key map[string]string // the Idempotency-Key each resource got last
}

func startLenient(t *testing.T) *lenientUpstream {
	t.Helper()
	u := &lenientUpstream{ran: map[string]int{}, key: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		res := strings.ToUpper(r.Method) + " " + lenientPath(r.RequestURI)
		u.mu.Lock()
		u.ran[res]++
		u.key[res] = r.Header.Get("Idempotency-Key")
		n := u.ran[res]
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"runs":%d}`, n)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// lenientPath is the resource a lenient framework takes a path for.
func lenientPath(target string) string {
	p, _, _ := strings.Cut(target, "?")
	if d, err := url.PathUnescape(p); err == nil {
		p = d
	}
	var segs []string
	for _, s := range strings.Split(strings.ReplaceAll(p, `\`, "/"), "/") {
		s, _, _ = strings.Cut(s, ";")
		segs = append(segs, s)
	}
	return strings.TrimSuffix(strings.ToLower(path.Clean("/"+strings.Join(segs, "/"))), "/")
}

func (u *lenientUpstream) runs(res string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ran[res]
}

func (u *lenientUpstream) keyOf(res string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.key[res]
}

// answer is what the gateway answered a raw request: its status, the
// problem type's name (if a problem), and whether it was replayed.
type answer struct {
	status   int
	problem  string
	replayed bool
}

// rawRequest sends the request line method target as written, byte for
// byte, with a JSON body and the headers given as name, value pairs.
func rawRequest(t *testing.T, gw, method, target string, headers ...string) answer {
	t.Helper()
	body := `{"amount":100}`
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", method, target, len(body))
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	return exchange(t, gw, b.String()+"\r\n"+body)
}

// exchange sends text, a whole request as written, and reads the answer.
func exchange(t *testing.T, gw, text string) answer {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, text)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if _, name, ok := strings.Cut(string(rb), "problems.md#"); ok && resp.Header.Get("Content-Type") == "application/problem+json" {
		a.problem, _, _ = strings.Cut(name, `"`)
	}
	return a
}

// edgeStores are the key stores the edges are checked on.
var edgeStores = []struct {
	name string
	db   func(t *testing.T) string
}{
	{"SQLite", func(t *testing.T) string { return t.TempDir() + "/keys.db" }},
	{"PostgreSQL", func(t *testing.T) string { return pgtest.SchemaURL(t, pgtest.Schema(t)) }},
}

// TestFailsClosed: one gateway, an exact route, a prefix route and an off
// route under it, in front of the lenient upstream, on each store.
func TestFailsClosed(t *testing.T) {
	t.Parallel()
	for _, st := range edgeStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			up := startLenient(t)
			config := writeFile(t, "gateway.yaml", fmt.Sprintf(`
upstreams:
  - {url: %q}
routes:
  - {match: POST /pay}
  - {match: POST /ledger/*}
  - {match: POST /ledger/reports/*, key: off}
`, up.url))
			gw := startGatewayWith(t, "--config", config, "--db", st.db(t))
			testFailsClosed(t, gw.url, up)
			for _, line := range []string{`msg=unguarded route="POST /ledger/reports/*" why="key off"`, `msg=unguarded route="GET, HEAD, OPTIONS"`} {
				require.Contains(t, gw.stderr.String(), line, "the start-up log lists what is unguarded")
			}
		})
	}
}

func testFailsClosed(t *testing.T, gw string, up *lenientUpstream) {
	alice := []string{"Authorization", "Bearer alice"}
	with := func(key string) []string { return append(alice, "Idempotency-Key", key) }
	fresh, replayed := answer{201, "", false}, answer{201, "", true}
	ambiguous, reused := answer{400, "request-ambiguous", false}, answer{422, "key-reused", false}

	t.Run("MethodCase", func(t *testing.T) {
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/pay", with("m-1")...))
		for _, m := range []string{"post", "Post", "pOST"} {
			require.Equal(t, ambiguous, rawRequest(t, gw, m, "/pay", with("m-1")...), m)
		}
		require.Equal(t, 1, up.runs("POST /pay"), "one key, one run, whatever the method's case")
	})

	t.Run("PathSpellings", func(t *testing.T) {
		for _, c := range []struct {
			target string
			want   answer
		}{
			{"/pay", replayed}, // m-1's answer: MethodCase ran it
			{"//pay", replayed},
			{"/a/../pay", replayed},
			{"/./pay", replayed},
			{"/%70ay", replayed},
			{"/pay?", replayed},
			{"/pay/", reused}, // guarded; another spelling is another request
			{"/PAY", reused},
			{"/Pay/", reused},
			{"/pay;x=1", ambiguous},
			{"/pay%2F", ambiguous},
			{"/pay%2f", ambiguous},
			{"/pay%5C", ambiguous},
			{`/pay\`, ambiguous},
			{"/x/..%2Fpay", ambiguous},
			{"/x/%2E%2E/pay", ambiguous},
			{"/x/.%2e/pay", ambiguous},
			{"/../pay", ambiguous},
			{"/pay%00", ambiguous},
			{"/pay%3Bx=1", ambiguous},
			{"/pay%252F", ambiguous},
			{"http://gateway//pay", replayed},
		} {
			require.Equal(t, c.want, rawRequest(t, gw, "POST", c.target, with("m-1")...), c.target)
		}
		require.Equal(t, 1, up.runs("POST /pay"), "every spelling of /pay under one key ran it once")

		// A prefix route: the spellings of /ledger/payments.
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/ledger/payments", with("p-1")...))
		for _, c := range []struct {
			target string
			want   answer
		}{
			{"//ledger/payments", replayed},
			{"/ledger//payments", replayed},
			{"/ledger/reports/../payments", replayed},
			{"/LEDGER/payments", reused},
			{"/ledger/reports/..%2Fpayments", ambiguous},
			{"/ledger/reports/%2E%2E/payments", ambiguous},
		} {
			require.Equal(t, c.want, rawRequest(t, gw, "POST", c.target, with("p-1")...), c.target)
		}
		require.Equal(t, 1, up.runs("POST /ledger/payments"))
		// The off route's exemption is its own spelling only: another
		// case falls to the guard of /ledger/*.
		require.Equal(t, answer{400, "key-missing", false}, rawRequest(t, gw, "POST", "/ledger/REPORTS/daily", alice...))
		require.Equal(t, 0, up.runs("POST /ledger/reports/daily"))
		// The prefix without its slash is the prefix's.
		require.Equal(t, answer{400, "key-missing", false}, rawRequest(t, gw, "POST", "/ledger", alice...))
	})

	t.Run("Unmatched", func(t *testing.T) {
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "PURGE"} {
			for i := 0; i < 2; i++ {
				require.Equal(t, answer{404, "route-unguarded", false}, rawRequest(t, gw, m, "/payments", with("u-1")...), m)
			}
		}
		require.Equal(t, answer{404, "route-unguarded", false}, rawRequest(t, gw, "POST", "/pay.", with("u-1")...))
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "PURGE"} {
			require.Equal(t, 0, up.runs(m+" /payments"), "%s: an unsafe request no route guards never reaches the upstream", m)
		}
		require.Equal(t, answer{201, "", false}, rawRequest(t, gw, "GET", "/payments", alice...), "a safe method passes")
	})

	t.Run("RawKeyStripped", func(t *testing.T) {
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/ledger/reports/daily", with("raw-secret-key")...))
		require.Equal(t, 1, up.runs("POST /ledger/reports/daily"))
		require.Empty(t, up.keyOf("POST /ledger/reports/daily"), "key off: the client's key does not go upstream")
		require.Equal(t, answer{201, "", false}, rawRequest(t, gw, "GET", "/anything", with("raw-secret-key")...))
		require.Empty(t, up.keyOf("GET /anything"), "unmatched: the client's key does not go upstream")
		require.Regexp(t, `^[0-9a-f]{32}$`, up.keyOf("POST /pay"), "guarded: the derived key does")
	})

	t.Run("AuthorizationScheme", func(t *testing.T) {
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/ledger/charges", with("a-1")...))
		for _, auth := range []string{"bearer alice", "BEARER alice", "Bearer  alice", "bEaReR\talice"} {
			require.Equal(t, replayed, rawRequest(t, gw, "POST", "/ledger/charges", "Authorization", auth, "Idempotency-Key", "a-1"), auth)
		}
		require.Equal(t, 1, up.runs("POST /ledger/charges"), "the scheme's case makes no second scope")
		require.Equal(t, answer{201, "", false}, rawRequest(t, gw, "POST", "/ledger/charges", "Authorization", "Bearer ALICE", "Idempotency-Key", "a-1"),
			"the credential's case is the credential's")
	})
}

// TestCatchAll: a configured catch-all forwards, unguarded and without
// the client's key, what no other route matches; the log says so.
func TestCatchAll(t *testing.T) {
	t.Parallel()
	up := startLenient(t)
	config := writeFile(t, "gateway.yaml", fmt.Sprintf("upstreams:\n  - {url: %q}\nroutes:\n  - {match: POST /pay}\n  - {match: \"* /*\", key: off}\n", up.url))
	gw := startGatewayWith(t, "--config", config)
	require.Contains(t, gw.stderr.String(), `msg=unguarded route="* /*" why="key off, a catch-all`)
	require.NotContains(t, gw.stderr.String(), `route="GET, HEAD, OPTIONS"`)
	for _, m := range []string{"POST", "PURGE"} {
		require.Equal(t, answer{201, "", false}, rawRequest(t, gw.url, m, "/payments", "Idempotency-Key", "c-1"), m)
		require.Equal(t, 1, up.runs(m+" /payments"))
		require.Empty(t, up.keyOf(m+" /payments"))
	}
	require.Equal(t, answer{400, "key-missing", false}, rawRequest(t, gw.url, "POST", "/PAY/", "Authorization", "Bearer a"), "the guard still matches every spelling of its route")
}

// TestScopeNotACredential: a scope header anyone may set is refused at
// start, the line saying what to write instead; declared a credential
// (or trusted), it is taken.
func TestScopeNotACredential(t *testing.T) {
	t.Parallel()
	file := func(scope string) string {
		return writeFile(t, "gateway.yaml", "upstreams:\n  - url: http://127.0.0.1:1\nroutes:\n  - match: POST /v1/*\n    scope: "+scope+"\n")
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--upstream", "http://x", "--scope-header", "X-Tenant"},
			"--scope-header X-Tenant is not a credential: anyone may send any X-Tenant and be answered from that scope's stored answers; " +
				"if the upstream authenticates requests by it, give --scope-credential-header X-Tenant; if a proxy in front sets it (and strips the client's), --scope-trusted-header X-Tenant"},
		{[]string{"--upstream", "http://x", "--scope-header", "Authorization", "--scope-trusted-header", "X-User"}, "give one of --scope-header, --scope-credential-header or --scope-trusted-header"},
		{[]string{"--config", file("{header: X-Tenant}")},
			"routes[0].scope: header: X-Tenant is not a credential: anyone may send any X-Tenant and be answered from that scope's stored answers; " +
				"if the upstream authenticates requests by it, write {credential_header: X-Tenant}; if a proxy in front sets it (and strips the client's), {trusted_header: X-Tenant}"},
		{[]string{"--config", writeFile(t, "defaults.yaml", "upstreams:\n  - url: http://127.0.0.1:1\ndefaults:\n  scope: {header: X-Tenant}\nroutes:\n  - match: POST /v1/*\n")},
			"defaults.scope: header: X-Tenant is not a credential"},
		{[]string{"--config", file("{header: Authorization, trusted_header: X-User}")}, "routes[0].scope: give one of header, credential_header or trusted_header"},
	} {
		// A gateway that started anyway listens on a port of its own.
		args := append([]string{"--addr", "127.0.0.1:0", "--db", t.TempDir() + "/keys.db"}, c.args...)
		_, stderr, code := gatewayCmd(t, "", args...)
		require.Equal(t, 2, code, "%v: %s", c.args, stderr)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)
		require.Contains(t, stderr, c.says, "%v", c.args)
	}

	up := startLenient(t)
	for _, args := range [][]string{
		{"--scope-credential-header", "X-Api-Key"},
		{"--scope-header", "authorization"},
		{"--config", writeFile(t, "credential.yaml", fmt.Sprintf("upstreams:\n  - url: %q\nroutes:\n  - match: POST /v1/*\n    scope: {credential_header: X-Api-Key}\n", up.url))},
	} {
		if args[0] != "--config" {
			args = append([]string{"--upstream", up.url}, args...)
		}
		startGatewayWith(t, args...)
	}
}
