package consoletest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// upstream is the service behind the gateway: its first charge never
// answers in time, so its outcome is unknown; it counts the charges that
// reach it, and answers anything else 404.
type upstream struct {
	hits atomic.Int32
	hang chan struct{} // closed when the test ends
}

func newUpstream(t *testing.T) (*upstream, string) {
	u := &upstream{hang: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if u.hits.Add(1) == 1 {
			<-u.hang // past the gateway's --upstream-timeout
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_again"}`)
	}))
	t.Cleanup(func() { close(u.hang); srv.Close() })
	return u, srv.URL
}

// gatewayWithUnknown starts idem-gateway with its console, in front of an
// upstream whose first charge times out: the key charge-1 then holds the
// stored outcome-unknown answer. It returns the gateway's and the
// console's URLs and the client's request headers.
func gatewayWithUnknown(t *testing.T, kind string) (*upstream, string, string, http.Header) {
	t.Helper()
	up, upURL := newUpstream(t)
	g := start(t, "idem-gateway", "--listen", "127.0.0.1:0", "--upstream", upURL, "--db", database(t, kind),
		"--upstream-timeout", "1s", "--metrics-addr", "127.0.0.1:0", "--console-token-file", tokenFile(t))
	consoleURL := g.await(t, `msg="operator console" url=(http://\S+/console/)`)
	api := g.await(t, `msg=listening url=(http://[0-9.:]+)`)
	client := http.Header{"Authorization": {"Bearer client-secret-key"}, "Content-Type": {"application/json"}, "Idempotency-Key": {"charge-1"}}
	for range 2 { // the first attempt, then a retry that gets the stored answer
		resp, body := call(t, "POST", api+"/v1/charges", client, chargeBody)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "outcome-unknown") {
			t.Fatalf("charge with the upstream timing out: want the 409 outcome-unknown problem, got %d %s", resp.StatusCode, body)
		}
	}
	return up, api, consoleURL, client
}

const chargeBody = `{"amount":1200,"currency":"EUR"}`

// The upstream's real answer, as the operator found it.
const realAnswer = `{"id":"ch_1","status":"succeeded"}`

// TestGatewayResolveUnknownOutcome: an operator finds the gateway's
// unknown outcome in the console, records the upstream's real answer,
// and the client's next retry replays it without reaching the upstream;
// the audit log shows who did it, when and why.
func TestGatewayResolveUnknownOutcome(t *testing.T) {
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(storeName(kind), func(t *testing.T) {
			up, api, consoleURL, client := gatewayWithUnknown(t, kind)

			ctx := newBrowser(t)
			signIn(t, ctx, consoleURL, "bob")
			if n := text(t, ctx, ".tile.unknown .n"); n != "1" {
				t.Fatalf("overview: %s unknown outcomes, want 1", n)
			}
			// At 1280 px the unknown outcomes' table fits its card and the
			// page; the gateway keeps no recovery points, so no unfinished
			// panel; the runbook is linked.
			type measure struct{ Page, Table, Card, Unfinished, Runbook float64 }
			fit := get(t, ctx, "measure the overview", chromedp.Evaluate[measure](`({
				Page: document.documentElement.scrollWidth,
				Table: document.querySelector("#unknown table").getBoundingClientRect().right,
				Card: document.querySelector("#unknown").getBoundingClientRect().right,
				Unfinished: document.querySelectorAll("#unfinished, .tile.unfinished").length,
				Runbook: document.querySelectorAll('#unknown a[href$="operations.md#runbook-unknown-outcomes"]').length})`))
			if fit.Page > 1280 || fit.Table > fit.Card || fit.Unfinished != 0 || fit.Runbook != 1 {
				t.Fatalf("overview at 1280 px: page %v px wide, table's right edge %v past its card's %v; %v unfinished panels, %v runbook links; want ≤ 1280, inside, 0 and 1",
					fit.Page, fit.Table, fit.Card, fit.Unfinished, fit.Runbook)
			}
			if kind == "postgres" {
				screenshot(t, ctx, "gateway-overview.png")
			}
			do(t, ctx, "search the unknown outcomes",
				chromedp.Navigate(consoleURL+"keys?state=unknown"),
				chromedp.Click(`//a[text()="charge-1"]`),
				chromedp.WaitVisible(chromedp.ID("answer-form")),
			)
			if st := text(t, ctx, "#state"); st != "outcome unknown" {
				t.Fatalf("record page: state %q, want outcome unknown", st)
			}
			if body := text(t, ctx, "#body"); !strings.Contains(body, "outcome-unknown") {
				t.Fatalf("record page: stored body %q, want the outcome-unknown problem", body)
			}
			if page := text(t, ctx, "main"); !strings.Contains(page, "Forwarded key") || !strings.Contains(page, "Why unknown") || !strings.Contains(page, "the runbook") {
				t.Fatalf("record page: no forwarded key, cause or runbook link:\n%s", page)
			}
			if kind == "postgres" {
				screenshot(t, ctx, "gateway-unknown.png")
			}
			do(t, ctx, "fill in the real answer",
				chromedp.SendKeys(chromedp.ID("answer-status"), "201"),
				chromedp.SendKeys(chromedp.ID("answer-body"), realAnswer),
			)
			confirmAction(t, ctx, "answer", "upstream dashboard shows ch_1 succeeded (INC-9)")
			if st := text(t, ctx, "#state"); st != "completed" {
				t.Fatalf("after recording the answer: state %q, want completed", st)
			}

			resp, body := call(t, "POST", api+"/v1/charges", client, chargeBody)
			if resp.StatusCode != http.StatusCreated || body != realAnswer || resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("client's retry: %d replayed=%q %s, want the recorded 201 %s, replayed", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body, realAnswer)
			}
			if n := up.hits.Load(); n != 1 {
				t.Fatalf("the upstream got %d requests, want 1: the retry must replay, not resend", n)
			}

			do(t, ctx, "open the audit log", chromedp.Navigate(consoleURL+"audit"), chromedp.WaitVisible(chromedp.CSS("table.audit")))
			audit := text(t, ctx, "table.audit")
			for _, want := range []string{"bob", "charge-1", "answer", "INC-9", "outcome unknown", "completed"} {
				if !strings.Contains(audit, want) {
					t.Fatalf("audit log lacks %q:\n%s", want, audit)
				}
			}
			if kind == "postgres" {
				screenshot(t, ctx, "audit.png")
			}
		})
	}
}
