package consoletest

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPaymentsdPendingPayout: a payout left pending because the bank is
// down is found in the console, its recovery point and payout shown; once
// the bank is back, "retry now" finishes it, the client's retry gets the
// stored answer, and the audit log names who did it and why.
func TestPaymentsdPendingPayout(t *testing.T) {
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(storeName(kind), func(t *testing.T) {
			db := database(t, kind)
			// The bank's address, where no bank answers yet.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			bankAddr := l.Addr().String()
			l.Close()
			secret := filepath.Join(t.TempDir(), "bank-secret")
			if err := os.WriteFile(secret, []byte("console-e2e-bank-secret-0123456789"), 0o600); err != nil {
				t.Fatal(err)
			}
			users := start(t, "paymentsd", "users", "create", "--db", db)
			apiKey := users.await(t, `"api_key":"([^"]+)"`)
			p := start(t, "paymentsd", "serve", "--db", db, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
				"--console-token-file", tokenFile(t), "--idempotency-mode", "leased",
				"--bank-url", "http://"+bankAddr, "--bank-key-secret-file", secret, "--bank-timeout", "2s",
				"--lock-timeout", "2s", "--complete-interval", "1h")
			api := p.await(t, `msg=listening url=(http://[0-9.:]+)`)
			consoleURL := p.await(t, `msg="operator console" url=(http://\S+/console/)`)

			auth := http.Header{"Authorization": {"Bearer " + apiKey}, "Content-Type": {"application/json"}}
			post := func(key, path, body string) (*http.Response, string) {
				h := auth.Clone()
				h.Set("Idempotency-Key", key)
				return call(t, "POST", api+path, h, body)
			}
			if resp, body := post("deposit-1", "/v1/deposits", `{"currency":"USD","amount":10000}`); resp.StatusCode != http.StatusCreated {
				t.Fatalf("deposit: %d %s", resp.StatusCode, body)
			}
			const payout = `{"currency":"USD","amount":2500,"destination":"acct-42"}`
			resp, body := post("payout-1", "/v1/payouts", payout)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("payout with the bank down: want 202 pending, got %d %s", resp.StatusCode, body)
			}

			ctx := newBrowser(t)
			signIn(t, ctx, consoleURL, "ann")
			if n := text(t, ctx, ".tile.unfinished .n"); n != "1" {
				t.Fatalf("overview: %s unfinished, want 1", n)
			}
			if kind == "postgres" {
				screenshot(t, ctx, "overview.png")
			}
			do(t, ctx, "search the unfinished keys",
				chromedp.Navigate(consoleURL+"keys?state=unfinished"),
				chromedp.Click(`//a[text()="payout-1"]`),
				chromedp.WaitVisible(chromedp.ID("recovery-point")),
			)
			if point := text(t, ctx, "#recovery-point"); point == "" || point == "none" {
				t.Fatalf("record page: recovery point %q, want the payout's", point)
			}
			if st := text(t, ctx, "#state"); st != "unfinished" {
				t.Fatalf("record page: state %q, want unfinished", st)
			}
			page := text(t, ctx, "main")
			if !strings.Contains(page, "pending") || !strings.Contains(page, "acct-42") {
				t.Fatalf("record page shows no pending payout to acct-42:\n%s", page)
			}
			// Nothing listens at the bank's address: the call was refused.
			if !strings.Contains(page, "Why the bank outcome is unknown") || !strings.Contains(page, "no answer: the call to the bank failed") {
				t.Fatalf("record page does not say why the bank outcome is unknown:\n%s", page)
			}
			// The payout's debit, as the ledger holds it: its entry number
			// and when it was written.
			entries := regexp.MustCompile(`Ledger entry\s+Currency\s+Amount \(minor units\)\s+Written\s+[1-9][0-9]*\s+USD\s+-2500\s+20\d\d-\d\d-\d\dT[0-9:.]+Z$`)
			if table := text(t, ctx, "section.card table.list"); !entries.MatchString(table) {
				t.Fatalf("record page: ledger entries %q, want the payout's one debit as the ledger holds it", table)
			}
			if kind == "postgres" {
				screenshot(t, ctx, "payout-record.png")
			}

			// The bank is back: retry now.
			bank := start(t, "bankd", "--addr", bankAddr, "--db", filepath.Join(t.TempDir(), "bank.db"))
			bank.await(t, `(http://`+bankAddr+`)`)
			confirmAction(t, ctx, "retry", "bank back after the outage (INC-7)")
			if st := text(t, ctx, "#state"); st != "completed" {
				t.Fatalf("after retry now: state %q, want completed", st)
			}
			if page := text(t, ctx, "main"); !strings.Contains(page, "paid") || strings.Contains(page, "Why the bank outcome is unknown") {
				t.Fatalf("record page after retry now: want the payout paid and no cause:\n%s", page)
			}
			if a := text(t, ctx, "#key-audit"); !strings.Contains(a, "ann") || !strings.Contains(a, "INC-7") || !strings.Contains(a, "retry") {
				t.Fatalf("audit of the key: %q, want ann's retry and its reason", a)
			}
			resp, body = post("payout-1", "/v1/payouts", payout)
			if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" || jsonField(t, body, "status") != "paid" {
				t.Fatalf("client's retry: %d replayed=%q %s, want the stored 201 paid", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
			}
		})
	}
}

func storeName(kind string) string {
	if kind == "postgres" {
		return "PostgreSQL"
	}
	return "SQLite"
}
