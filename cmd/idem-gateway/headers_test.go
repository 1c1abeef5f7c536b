package main_test

// The headers the gateway reads, or that decide what an upstream runs,
// have one spelling too: a credential is one scope, the key and the scope
// reach the upstream under their own names only, no header turns a
// request into another method, and no Upgrade but WebSocket's opens a
// tunnel past the guard.

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// headerUpstream answers 201 to every request and records the headers
// and trailers of each, and how many requests it got.
type headerUpstream struct {
	url  string
	mu   sync.Mutex
	got  int
	seen []http.Header // headers and trailers, in one map per request
}

func startHeaderUpstream(t *testing.T) *headerUpstream {
	t.Helper()
	u := &headerUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := r.Header.Clone()
		for name, v := range r.Trailer {
			h[name] = append(h[name], v...)
		}
		u.mu.Lock()
		u.got++
		u.seen = append(u.seen, h)
		u.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *headerUpstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got
}

// under returns every value the upstream got for name under any
// spelling a CGI, WSGI or Rack server maps to one variable: case ignored,
// _ read as -.
func (u *headerUpstream) under(name string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var vs []string
	for _, h := range u.seen {
		for n, v := range h {
			if strings.EqualFold(strings.ReplaceAll(n, "_", "-"), name) {
				for _, s := range v {
					vs = append(vs, n+": "+s)
				}
			}
		}
	}
	return vs
}

// TestCredentialOneSpelling: base64 leaves unused bits at the end of a
// value that does not fill its last group, and decoders (Go's, Python's)
// ignore them: "YWxpY2U6cHc=" and "YWxpY2U6cHd=" are both alice:pw. A
// spelling other than the canonical one is refused, for Basic and for
// each part of a JWS-shaped Bearer token, so one key runs once per user.
func TestCredentialOneSpelling(t *testing.T) {
	t.Parallel()
	up := startLenient(t)
	gw := startGatewayWith(t, "--upstream", up.url).url
	fresh, replayed, ambiguous := answer{201, "", false}, answer{201, "", true}, answer{400, "request-ambiguous", false}

	t.Run("Basic", func(t *testing.T) {
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/basic", "Authorization", "Basic YWxpY2U6cHc=", "Idempotency-Key", "b-1"))
		require.Equal(t, replayed, rawRequest(t, gw, "POST", "/basic", "Authorization", "basic YWxpY2U6cHc=", "Idempotency-Key", "b-1"))
		for _, creds := range []string{"YWxpY2U6cHd=", "YWxpY2U6cHe=", "YWxpY2U6cHf=", "YWxpY2U6cHc", "YWxpY2U6cHc==", "YWxp Y2U6cHc="} {
			require.Equal(t, ambiguous, rawRequest(t, gw, "POST", "/basic", "Authorization", "Basic "+creds, "Idempotency-Key", "b-1"), creds)
		}
		require.Equal(t, 1, up.runs("POST /basic"), "alice:pw ran once under one key")
	})

	t.Run("JWS", func(t *testing.T) {
		enc := base64.RawURLEncoding
		// The signature's bytes spell - and _ in base64url.
		sig := enc.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16)))
		token := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(`{"sub":"alice"}`)) + "." + sig
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/jws", "Authorization", "Bearer "+token, "Idempotency-Key", "j-1"))
		for _, spelling := range []string{
			withTrailingBits(token), // the signature's unused bits set
			token + "=",             // padded
			strings.NewReplacer("-", "+", "_", "/").Replace(token), // the standard alphabet
			strings.Replace(token, ".", "=.", 1),                   // a padded header
		} {
			require.Equal(t, ambiguous, rawRequest(t, gw, "POST", "/jws", "Authorization", "Bearer "+spelling, "Idempotency-Key", "j-1"), spelling)
		}
		require.Equal(t, 1, up.runs("POST /jws"), "one token ran once under one key")

		// An opaque token with dots is no JWS: taken as sent.
		require.Equal(t, fresh, rawRequest(t, gw, "POST", "/opaque", "Authorization", "Bearer abc.def.ghi", "Idempotency-Key", "o-1"))
	})
}

// withTrailingBits is token with its last character's unused low bit set:
// another spelling of the same bytes.
func withTrailingBits(token string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, token[len(token)-1])
	return token[:len(token)-1] + string(alphabet[last|1])
}

// TestKeyAndScopeUnderOneName: a CGI, WSGI or Rack upstream reads
// Idempotency_Key as Idempotency-Key (both HTTP_IDEMPOTENCY_KEY), and
// X_User_Id as X-User-Id; a request trailer may carry either too. Any of
// them is refused, guarded or not: the upstream never gets a raw key, or
// a scope header the gateway did not read.
func TestKeyAndScopeUnderOneName(t *testing.T) {
	t.Parallel()
	up := startHeaderUpstream(t)
	routes := "  - {match: POST /pay}\n  - {match: POST /trusted/*, scope: {trusted_header: X-User-Id}}\n  - {match: POST /keyed/*, scope: {credential_header: X-Api-Key}}\n"
	config := writeFile(t, "gateway.yaml", fmt.Sprintf("upstreams:\n  - {url: %q}\nroutes:\n", up.url)+routes)
	gw := startGatewayWith(t, "--config", config).url
	ambiguous := answer{400, "request-ambiguous", false}
	alice := []string{"Authorization", "Bearer alice", "Idempotency-Key", "k-1"}
	for _, c := range []struct {
		name, method, target string
		headers              []string
	}{
		{"KeyUnguarded", "GET", "/pay", []string{"Idempotency_Key", "raw-unguarded"}},
		{"KeyGuarded", "POST", "/pay", append(alice, "Idempotency_Key", "raw-guarded")},
		{"KeyUpperCase", "GET", "/pay", []string{"IDEMPOTENCY_KEY", "raw-upper"}},
		{"TrustedScope", "POST", "/trusted/x", []string{"X-User-Id", "alice", "X_User_Id", "bob", "Idempotency-Key", "k-2"}},
		{"CredentialScope", "POST", "/keyed/x", []string{"X-Api-Key", "alice", "X_API_KEY", "bob", "Idempotency-Key", "k-3"}},
		{"Authorization", "GET", "/pay", []string{"Authorization_", "x"}}, // not Authorization: passes
	} {
		want := ambiguous
		if c.name == "Authorization" {
			want = answer{201, "", false}
		}
		require.Equal(t, want, rawRequest(t, gw, c.method, c.target, c.headers...), c.name)
	}
	for _, trailer := range []string{"Idempotency-Key", "Idempotency_Key", "X-User-Id", "Authorization"} {
		body := `{"amount":100}`
		req := fmt.Sprintf("POST /pay HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer alice\r\nIdempotency-Key: t-1\r\nContent-Type: application/json\r\n"+
			"Transfer-Encoding: chunked\r\nTrailer: %s\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n%s: raw-trailer\r\n\r\n", trailer, len(body), body, trailer)
		require.Equal(t, ambiguous, exchange(t, gw, req), "trailer %s", trailer)
	}
	require.Equal(t, 1, up.requests(), "only the request with Authorization_ was forwarded")
	require.Empty(t, up.under("Idempotency-Key"), "no raw key reached the upstream")
	require.Empty(t, up.under("X-User-Id"))
	require.Empty(t, up.under("X-Api-Key"))
}

// TestMethodOverrideRefused: Rack, Express's method-override and
// ASP.NET run a request as the method an X-HTTP-Method-Override (or
// X-HTTP-Method, X-Method-Override, any spelling) names: an unguarded GET
// would run as a POST. One that names another method is refused.
func TestMethodOverrideRefused(t *testing.T) {
	t.Parallel()
	up := startHeaderUpstream(t)
	gw := startGatewayWith(t, "--upstream", up.url).url
	alice := []string{"Authorization", "Bearer alice", "Idempotency-Key", "o-1"}
	ambiguous := answer{400, "request-ambiguous", false}
	for _, c := range []struct {
		method  string
		headers []string
		want    answer
	}{
		{"GET", []string{"X-HTTP-Method-Override", "POST"}, ambiguous},
		{"GET", []string{"X-Http-Method", "DELETE"}, ambiguous},
		{"GET", []string{"X-Method-Override", "PUT"}, ambiguous},
		{"GET", []string{"X_HTTP_Method_Override", "POST"}, ambiguous},
		{"POST", append(alice, "X-HTTP-Method-Override", "GET"), ambiguous},
		{"GET", []string{"X-HTTP-Method-Override", "GET"}, answer{201, "", false}}, // the request's own method
		{"POST", append(alice, "X-HTTP-Method-Override", "post"), answer{201, "", false}},
	} {
		require.Equal(t, c.want, rawRequest(t, gw, c.method, "/pay", c.headers...), "%s %v", c.method, c.headers)
	}
	require.Equal(t, 2, up.requests(), "only the overrides naming the request's own method were forwarded")
}

// TestUpgradeOnlyWebSocket: a request with an Upgrade other than a
// WebSocket handshake's (h2c here) is forwarded without it, as RFC 9110
// §7.8 lets a server ignore it: an upstream that would switch (Tomcat,
// Jetty, Hypercorn with h2c on) answers over HTTP/1.1, and no tunnel
// carries requests past the guard. The upstream here switches when asked,
// then serves HTTP/1.1 on the tunnel, counting the POSTs it runs there.
func TestUpgradeOnlyWebSocket(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]string{
		"UnguardedGET": "GET /anything HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
		"GuardedPOST": "POST /pay HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer a\r\nIdempotency-Key: up-1\r\nContent-Length: 2\r\n" +
			"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n{}",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testUpgradeOnlyWebSocket(t, first)
		})
	}
}

func testUpgradeOnlyWebSocket(t *testing.T, first string) {
	var mu sync.Mutex
	tunnelled, upgrades := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("Upgrade") == "" {
			w.WriteHeader(http.StatusOK)
			return
		}
		mu.Lock()
		upgrades++
		mu.Unlock()
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
		_ = rw.Flush()
		for {
			req, err := http.ReadRequest(rw.Reader)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			mu.Lock()
			tunnelled++
			mu.Unlock()
			_, _ = rw.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
			_ = rw.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	gw := startGatewayWith(t, "--upstream", srv.URL).url
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, first)
	require.NoError(t, err)
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "answered over HTTP/1.1, not switched")

	// The connection is still the gateway's: an unkeyed POST on it is
	// refused, not run.
	_, err = io.WriteString(conn, "POST /pay HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer a\r\nContent-Length: 2\r\n\r\n{}")
	require.NoError(t, err)
	resp, err = http.ReadResponse(rd, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the guard answers: key-missing")
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, upgrades, "the upstream was never asked to upgrade")
	require.Zero(t, tunnelled, "nothing ran through a tunnel")
}
