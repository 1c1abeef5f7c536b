package clienttest

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// wait is how long a recipe may take: it waits out Retry-After (1 s) a
// few times on a shared machine.
const wait = 2 * time.Minute

func collect(t *testing.T, done <-chan []seen, taps int) []seen {
	t.Helper()
	select {
	case all := <-done:
		require.Len(t, all, taps, "%+v", all)
		for _, s := range all {
			require.Empty(t, s.Error, "%+v", all)
		}
		return all
	case <-time.After(wait):
		t.Fatalf("the client did not end within %v", wait)
		return nil
	}
}

// TestDoubleTapPaymentsd: each recipe sends one deposit twice at once
// (one key) to paymentsd in leased mode: both sends end in 201, one of
// them a replay (the other send's answer, after 409 in-flight and its
// Retry-After when it came while the first ran), and the balance moved
// once.
func TestDoubleTapPaymentsd(t *testing.T) {
	p := startPaymentsd(t)
	for i, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			amount := int64(1000 + i) // the deposits' minute net refuses an equal deposit within a minute
			before := p.balance(t, "USD")
			all := collect(t, r.run(t, p.url+"/v1/deposits", p.auth, fmt.Sprintf(`{"currency":"USD","amount":%d}`, amount), 2), 2)
			t.Logf("%s saw: %+v", r.name, all)
			for _, s := range all {
				require.Equal(t, http.StatusCreated, s.Status, "%+v", all)
			}
			require.True(t, all[0].Replayed != all[1].Replayed, "one send ran, the other got its answer: %+v", all)
			require.Equal(t, before+amount, p.balance(t, "USD"), "one deposit")
		})
	}
}

// TestDoubleTapGateway: each recipe sends one operation twice at once (one
// key) through idem-gateway to an upstream that holds it until released:
// the second send gets 409 in-flight with Retry-After and
// Idempotent-Should-Retry: true, which the recipe retries until it gets
// the first send's answer, replayed; the upstream ran it once.
func TestDoubleTapGateway(t *testing.T) {
	db := database(t)
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			g := startGateway(t, db)
			done := r.run(t, g.url+"/slow", "Bearer "+r.name, `{"amount":100}`, 2)
			require.Eventually(t, func() bool { return strings.Contains(g.log.String(), "outcome=in_flight") }, wait, 20*time.Millisecond,
				"the second send got 409 in-flight")
			require.Equal(t, 1, g.upstreamRequests(t))
			_, err := g.release.Write([]byte("go\n"))
			require.NoError(t, err)
			all := collect(t, done, 2)
			t.Logf("%s saw: %+v", r.name, all)
			for _, s := range all {
				require.Equal(t, http.StatusCreated, s.Status, "%+v", all)
			}
			require.True(t, all[0].Replayed != all[1].Replayed, "one send ran, the other got its answer: %+v", all)
			require.True(t, all[0].Attempts+all[1].Attempts >= 3, "the in-flight 409 was retried: %+v", all)
			require.Equal(t, 1, g.upstreamRequests(t), "the upstream ran the operation once")
		})
	}
}

// TestUpstreamKilled: each recipe sends one operation through idem-gateway
// to an upstream that is killed (SIGKILL) while it holds the request: the
// gateway answers 409 outcome-unknown with Idempotent-Should-Retry: false
// and no Retry-After, and the recipe hands that answer to the caller after
// one attempt instead of sending the operation again.
func TestUpstreamKilled(t *testing.T) {
	db := database(t)
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			g := startGateway(t, db)
			done := r.run(t, g.url+"/slow", "Bearer "+r.name, `{"amount":100}`, 1)
			require.Eventually(t, func() bool { return g.upstreamRequests(t) == 1 }, wait, 20*time.Millisecond, "the request reached the upstream")
			require.NoError(t, g.upstream.cmd.Process.Signal(syscall.SIGKILL))
			all := collect(t, done, 1)
			t.Logf("%s saw: %+v", r.name, all)
			require.Equal(t, seen{Status: http.StatusConflict, ShouldRetry: "false", Attempts: 1}, all[0])
			require.Equal(t, 1, strings.Count(g.log.String(), `msg="outcome unknown"`), "one send reached the gateway's upstream call")
		})
	}
}
