package consoletest

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleRefusals: an action without the admin's session, without the
// CSRF token, with a wrong one, or from another origin is refused and
// changes nothing; a wrong admin token signs no one in; the console is not
// on the API listener; every page carries the security headers.
func TestConsoleRefusals(t *testing.T) {
	up, api, consoleURL, _ := gatewayWithUnknown(t, "sqlite")
	keyPage := consoleURL + "key?scope=" + url.QueryEscape(scopeOf(t, consoleURL)) + "&key=charge-1"
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "scope": {scopeOf(t, consoleURL)}, "key": {"charge-1"}, "token": {fencingToken(t, consoleURL)},
			"reason": {"test"}, "confirm": {"yes"}}
	}
	post := func(t *testing.T, path string, h http.Header, v url.Values) int {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, _ := call(t, "POST", consoleURL+path, h, v.Encode())
		return resp.StatusCode
	}
	cookie, csrf := session(t, consoleURL)

	t.Run("NoCredential", func(t *testing.T) {
		if code := post(t, "key/reopen", nil, form(csrf)); code != http.StatusUnauthorized {
			t.Fatalf("reopen without a session: %d, want 401", code)
		}
		if code := post(t, "key/reopen", http.Header{"Cookie": {"idem_console=forged"}}, form(csrf)); code != http.StatusUnauthorized {
			t.Fatalf("reopen with a forged session: %d, want 401", code)
		}
		resp, _ := call(t, "GET", keyPage, nil, "")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "/console/login") {
			t.Fatalf("record page without a session: %d %s, want a redirect to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("WrongAdminToken", func(t *testing.T) {
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		resp, _ := call(t, "POST", consoleURL+"login", h, url.Values{"name": {"eve"}, "token": {"sk_an-api-key-is-not-the-admin-token"}}.Encode())
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("sign-in with a wrong token: %d, cookie %q; want 401 and none", resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	})
	t.Run("NoCSRFToken", func(t *testing.T) {
		v := form("")
		v.Del("csrf")
		if code := post(t, "key/reopen", http.Header{"Cookie": {cookie}}, v); code != http.StatusForbidden {
			t.Fatalf("reopen without the CSRF token: %d, want 403", code)
		}
	})
	t.Run("WrongCSRFToken", func(t *testing.T) {
		if code := post(t, "key/answer", http.Header{"Cookie": {cookie}}, form("forged-"+csrf)); code != http.StatusForbidden {
			t.Fatalf("answer with a wrong CSRF token: %d, want 403", code)
		}
	})
	t.Run("OtherOrigin", func(t *testing.T) {
		h := http.Header{"Cookie": {cookie}, "Origin": {"http://evil.example"}}
		if code := post(t, "key/reopen", h, form(csrf)); code != http.StatusForbidden {
			t.Fatalf("reopen posted from another origin: %d, want 403", code)
		}
	})
	t.Run("NoReasonOrConfirmation", func(t *testing.T) {
		v := form(csrf)
		v.Del("confirm")
		if code := post(t, "key/reopen", http.Header{"Cookie": {cookie}}, v); code != http.StatusBadRequest {
			t.Fatalf("reopen without confirmation: %d, want 400", code)
		}
	})
	t.Run("BrowserFormWithoutCSRF", func(t *testing.T) {
		ctx := newBrowser(t)
		signIn(t, ctx, consoleURL, "mallory")
		do(t, ctx, "strip the CSRF token from the reopen form and submit it",
			chromedp.Navigate(keyPage),
			chromedp.WaitVisible(chromedp.ID("reopen-form")),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#reopen-form input[name=csrf]').remove()`),
			chromedp.SendKeys(chromedp.ID("reopen-reason"), "no token"),
			chromedp.Click(chromedp.ID("reopen-confirm")),
			chromedp.Click(chromedp.ID("reopen-submit")),
			chromedp.WaitVisible(chromedp.CSS(".flash.error")),
		)
		if msg := text(t, ctx, ".flash.error"); !strings.Contains(msg, "CSRF") {
			t.Fatalf("browser: %q, want the CSRF refusal", msg)
		}
	})
	t.Run("NotOnTheAPIListener", func(t *testing.T) {
		resp, body := call(t, "GET", api+"/console/", nil, "")
		if strings.Contains(body, "operator console") || resp.Header.Get("Content-Security-Policy") != "" {
			t.Fatalf("the API listener served the console: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("SecurityHeaders", func(t *testing.T) {
		resp, _ := call(t, "GET", consoleURL+"login", nil, "")
		for h, want := range map[string]string{
			"Content-Security-Policy": "frame-ancestors 'none'", "X-Frame-Options": "DENY",
			"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
		} {
			if !strings.Contains(resp.Header.Get(h), want) {
				t.Errorf("%s: %q, want %q in it", h, resp.Header.Get(h), want)
			}
		}
	})

	// Nothing changed: the record still holds the unknown outcome, and no
	// action reached the audit log.
	page := authedGet(t, keyPage, cookie)
	if !strings.Contains(page, "outcome unknown") || !strings.Contains(page, "No operator action on this key") {
		t.Fatalf("after the refusals the record changed or the audit log has an entry:\n%s", page)
	}
	if n := up.hits.Load(); n != 1 {
		t.Fatalf("the upstream got %d requests, want 1", n)
	}
}

// session signs in over HTTP and returns the session cookie and its CSRF
// token.
func session(t *testing.T, consoleURL string) (cookie, csrf string) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	resp, _ := call(t, "POST", consoleURL+"login", h, url.Values{"name": {"carol"}, "token": {adminToken}}.Encode())
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	cookie = resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(authedGet(t, consoleURL, cookie))
	if m == nil {
		t.Fatal("no CSRF token on the overview")
	}
	return cookie, m[1]
}

func authedGet(t *testing.T, u, cookie string) string {
	t.Helper()
	resp, body := call(t, "GET", u, http.Header{"Cookie": {cookie}}, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	return body
}

// scopeOf and fencingToken read charge-1's record from the console's
// search, as an attacker who knew them would.
func scopeOf(t *testing.T, consoleURL string) string {
	return field(t, consoleURL, `name="scope" value="([^"]+)"`)
}

func fencingToken(t *testing.T, consoleURL string) string {
	return field(t, consoleURL, `name="token" value="([^"]+)"`)
}

func field(t *testing.T, consoleURL, re string) string {
	t.Helper()
	cookie, _ := session(t, consoleURL)
	list := authedGet(t, consoleURL+"keys?key=charge-1", cookie)
	m := regexp.MustCompile(`href="([^"]*key\?scope=[^"]+)"`).FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("charge-1 not found in the console's search:\n%s", list)
	}
	u, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	page := authedGet(t, consoleURL+"key?"+u.RawQuery, cookie)
	f := regexp.MustCompile(re).FindStringSubmatch(page)
	if f == nil {
		t.Fatalf("no %s on the record page", re)
	}
	return f[1]
}
