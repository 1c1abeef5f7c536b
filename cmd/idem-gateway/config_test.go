package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/cmd/internal/dburl/dburltest"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// send posts body to url with the headers given as name, value pairs.
func send(t *testing.T, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestConfiguredEstate: one gateway, configured by a YAML file, fronts two
// upstreams (Python and Node) by path prefix, with a route of each key
// mode; what each does with a request without a key, and with one.
func TestConfiguredEstate(t *testing.T) {
	t.Parallel()
	ledger := startUpstream(t)                                // Python
	orders := startProgram(t, "node", "testdata/upstream.js") // Node
	config := writeFile(t, "gateway.yaml", fmt.Sprintf(`
log:
  format: text
upstreams:
  - name: ledger
    url: %s
    prefix: /ledger/
  - name: orders
    url: %s
    prefix: /orders/
defaults:
  ttl: 24h
  upstream_timeout: 5s
routes:
  - match: POST /ledger/*
    key: required
  - match: POST /orders/*
    key: optional
    fingerprint:
      ignore: [client_time]
  - match: POST /orders/search
    key: off
`, ledger.url, orders.url))
	gw := startGatewayWith(t, "--config", config).url
	auth := []string{"Authorization", "Bearer alice"}

	// Without a key.
	resp, body := send(t, gw+"/ledger/payments", `{"amount":1}`, auth...)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "#key-missing")
	t.Logf("required: POST /ledger/payments without a key → %d %s", resp.StatusCode, strings.TrimSpace(body))
	for i := 1; i <= 2; i++ {
		resp, body = send(t, gw+"/orders/create", `{"amount":1}`, auth...)
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
		require.Equal(t, fmt.Sprintf(`{"runs":%d}`, i), body, "forwarded each time, nothing stored")
		t.Logf("optional: POST /orders/create without a key (#%d) → %d %s, forwarded as is", i, resp.StatusCode, body)
	}
	resp, body = send(t, gw+"/orders/search", `{"q":"x"}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	t.Logf("off: POST /orders/search without a key (and without Authorization) → %d %s, forwarded as is", resp.StatusCode, body)

	// With a key: guarded where the route says so; a replay is faithful.
	first, fb := send(t, gw+"/orders/create", `{"amount":2,"client_time":"10:00"}`, append(auth, "Idempotency-Key", "o-1")...)
	again, ab := send(t, gw+"/orders/create", `{"amount":2,"client_time":"10:01"}`, append(auth, "Idempotency-Key", "o-1")...)
	require.Equal(t, http.StatusCreated, first.StatusCode, fb)
	require.Equal(t, fb, ab)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "client_time is out of the fingerprint")
	for _, h := range []string{"X-Request-Id", "Cache-Control", "Link", "Content-Type"} {
		require.Equal(t, first.Header.Get(h), again.Header.Get(h), "%s is replayed", h)
	}
	require.NotEmpty(t, first.Header.Get("Set-Cookie"))
	require.Empty(t, again.Header.Get("Set-Cookie"), "a cookie is never replayed")
	resp, body = send(t, gw+"/ledger/payments", `{"amount":1}`, append(auth, "Idempotency-Key", "l-1")...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, _ = send(t, gw+"/ledger/payments", `{"amount":1}`, append(auth, "Idempotency-Key", "l-1")...)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	resp, body = send(t, gw+"/orders/search", `{"q":"x"}`, "Idempotency-Key", "s-1")
	require.Equal(t, `{"runs":2}`, body, "the key is not forwarded: to the upstream, the same keyless search again")
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"), "key off: never guarded")

	require.Len(t, ledger.log(t), 1, "the ledger ran the keyed payment once, never the keyless one")
	keys := map[string]int{}
	for _, e := range orders.log(t) {
		keys[e.Path+" "+e.Key]++
	}
	require.Equal(t, 2, keys["/orders/search "], "key off: the client's own key never goes upstream: %v", keys)
	require.Len(t, keys, 3, "orders: create without a key (twice), create with o-1's derived key (once), search (twice, no key): %v", keys)
}

// TestBadConfiguration: a bad command line or configuration file is one
// line naming the setting, exit 2.
func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	yaml := func(name, routes string) string {
		return writeFile(t, name, "upstreams:\n  - url: http://127.0.0.1:1\nroutes:\n"+routes)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{}, "--upstream is required (or --config FILE)"},
		{[]string{"--upstream", "ftp://x"}, `--upstream: "ftp://x": want an http:// or https:// URL`},
		{[]string{"--upstream", "http://x", "--routes", "POST"}, `--routes[0]: "POST": want 'METHOD /path'`},
		{[]string{"--upstream", "http://x", "--routes", "POST /v1/*,POST /v1/*"}, `--routes[1]: "POST /v1/*" matches what --routes[0]`},
		{[]string{"--bogus"}, "flag provided but not defined: --bogus (run 'idem-gateway serve --help' for usage)"},
		{[]string{"--upstream-timeout", "soon"}, "want a duration such as 30s"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, "no such file or directory"},
		{[]string{"--config", yaml("unknown.yaml", "  - match: POST /v1/*\n    tll: 1h\n")}, `line 5: unknown field "tll"`},
		{[]string{"--config", yaml("duration.yaml", "  - match: POST /v1/*\n    ttl: 2days\n")}, `routes[0].ttl: "2days": want a positive duration`},
		{[]string{"--config", yaml("ambiguous.yaml", "  - match: POST /v1/*\n  - match: POST /v1/*\n    key: optional\n")}, `routes[1].match: "POST /v1/*" matches what routes[0] "POST /v1/*" matches`},
		{[]string{"--config", yaml("mode.yaml", "  - match: POST /v1/*\n    key: maybe\n")}, `routes[0].key: "maybe": want required, optional or off`},
		{[]string{"--config", yaml("both.yaml", "  - match: POST /v1/*\n    fingerprint: {ignore: [a], select: [b]}\n")}, "routes[0].fingerprint: give ignore or select, not both"},
		{[]string{"--config", yaml("global.yaml", "  - match: POST /v1/*\n") + "", "--routes", "POST /x"}, "--routes: with --config, the upstreams and routes are the file's"},
		{[]string{"--config", writeFile(t, "limits.yaml", "limits:\n  body_timeout: forever\nupstreams:\n  - url: http://127.0.0.1:1\n")}, `limits.body_timeout "forever"`},
		{[]string{"--upstream", "http://x", "--db", "mysql://u:s3cret@/db"}, "--db mysql:///db names no host"},
		{[]string{"--upstream", "http://x", "--db", "redis://h"}, "--db: redis URLs are not supported"},
		{[]string{"keys"}, "keys: a subcommand is required"},
		{[]string{"keys", "forget"}, `keys: unknown subcommand "forget"`},
		{[]string{"keys", "list", "--state", "completed"}, "--state must be unknown, in-flight or failed"},
		{[]string{"keys", "show", "--key", "k"}, "--scope and --key are required"},
		{[]string{"keys", "resolve", "--scope", "s", "--key", "k"}, "give either --reopen or --status"},
		{[]string{"keys", "resolve", "--scope", "s", "--key", "k", "--reopen", "--status", "201"}, "give either --reopen or --status"},
		{[]string{"keys", "resolve", "--scope", "s", "--key", "k", "--status", "500"}, "want a final answer"},
		{[]string{"keys", "sweep", "--batch-size", "0"}, "--batch-size must be positive"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		dir := t.TempDir()
		cmd := exec.Command(binary, c.args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v", c.args)
		require.Equal(t, 2, ee.ExitCode(), "%v: %s", c.args, out)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "one line: %s", out)
		require.Contains(t, string(out), c.says, "%v", c.args)
		require.NotContains(t, string(out), "s3cret")
		entries, err := filepath.Glob(filepath.Join(dir, "*"))
		require.NoError(t, err)
		require.Empty(t, entries, "%v: nothing created", c.args)
	}
}

// TestHelp: --help, -h and help print the usage on stdout, flags spelt
// --name, exit 0, for every command.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"serve", "--help"}, {"--upstream", "http://x", "--help"}, {"migrate", "--help"},
		{"keys", "--help"}, {"keys", "help"}, {"keys", "list", "--help"}, {"keys", "show", "-h"}, {"keys", "resolve", "--help"}, {"keys", "sweep", "--help"},
	} {
		stdout, stderr, code := gatewayCmd(t, "", args...)
		require.Zero(t, code, "%v: %s", args, stderr)
		require.Empty(t, stderr, "%v", args)
		require.Contains(t, stdout, "Usage")
		require.NotRegexp(t, `(?m)^\s+-[a-z]`, stdout, "flags are spelt --name")
		for _, old := range []string{"--listen", "--release"} {
			require.NotContains(t, stdout, old, "a deprecated alias is not advertised")
		}
	}
	stdout, _, _ := gatewayCmd(t, "", "--help")
	for _, c := range []string{"idem-gateway [serve]", "idem-gateway version", "idem-gateway help"} {
		require.Contains(t, stdout, c, "the commands are listed as paymentsd and bankd list theirs")
	}
	stdout, _, code := gatewayCmd(t, "", "version")
	require.Zero(t, code)
	require.True(t, strings.HasPrefix(stdout, "idem-gateway "), "%q", stdout)
	stdout, _, _ = gatewayCmd(t, "", "serve", "--help")
	for _, f := range []string{"--addr", "--config", "--db", "--metrics-addr", "--log-level", "--log-format", "--body-timeout", "--requests-per-scope"} {
		require.Contains(t, stdout, f)
	}
}

// TestListenAlias: --listen, the old name of --addr, still works.
func TestListenAlias(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGatewayWith(t, "--upstream", up.url, "--listen", "127.0.0.1:0")
	require.Equal(t, reply{201, `{"runs": 1}`, false}, post(t, gw.url, "/ok", "Bearer alice", "k"))
}

// TestHostilePasswordsNotPrinted runs idem-gateway migrate and serve with
// every hostile password in every form: no start-up line ("key store
// ready", the migrate line) and no error shows a part of one.
func TestHostilePasswordsNotPrinted(t *testing.T) {
	t.Parallel()
	base := pgtest.SchemaURL(t, pgtest.Schema(t))
	var all, migrated strings.Builder
	for _, db := range dburltest.DSNs(t, base) {
		out, errOut, code := gatewayCmd(t, "", "migrate", "--db", db)
		all.WriteString(out + errOut)
		if code == 0 {
			migrated.WriteString(out)
		}
	}
	require.NotContains(t, all.String(), dburltest.Marker)
	require.Contains(t, migrated.String(), dburltest.Shown(t, base), "the migrate line shows the database")
	for _, db := range []string{dburltest.DSNs(t, base)[0], dburltest.DSNs(t, base)[2]} {
		g := startGatewayWith(t, "--upstream", "http://127.0.0.1:1", "--db", db)
		require.Contains(t, g.stderr.String(), "key store ready")
		require.NotContains(t, g.stderr.String(), dburltest.Marker)
	}
}
