package main_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
)

// TestShouldRetryHeader: every answer the gateway gives itself says, in
// Idempotent-Should-Retry, whether a retry with the same key may get
// another answer, so that a client tells the 409s apart without the body:
// in flight (true, with Retry-After) and outcome unknown (false, no
// Retry-After, on the replay too); and upstream-unavailable (true),
// unauthenticated (false).
func TestShouldRetryHeader(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGateway(t, up, "--upstream-timeout", "1m")
	t.Cleanup(func() { _, _ = io.WriteString(up.release, "go\n") })
	post := func(gw, path, auth, key string) (*http.Response, string) {
		return send(t, gw+path, `{"amount":100}`, "Authorization", auth, "Idempotency-Key", key)
	}

	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, gw+"/slow", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", "k-held")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return len(up.log(t)) == 1 }, time.Minute, 10*time.Millisecond, "the first request reached the upstream")
	resp, body := post(gw, "/slow", "Bearer alice", "k-held")
	requireAdvice(t, resp, body, http.StatusConflict, "in-flight", "true")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	_, _ = io.WriteString(up.release, "go\n")
	require.Equal(t, http.StatusCreated, <-first)

	for _, replayed := range []bool{false, true} {
		resp, body := post(gw, "/die", "Bearer alice", "k-die")
		requireAdvice(t, resp, body, http.StatusConflict, "outcome-unknown", "false")
		require.Empty(t, resp.Header.Get("Retry-After"))
		require.Equal(t, replayed, resp.Header.Get("Idempotent-Replayed") == "true")
	}
	resp, body = post(gw, "/ok", "", "k-anon")
	requireAdvice(t, resp, body, http.StatusUnauthorized, "scope-missing", "false")

	nowhere := startGatewayWith(t, "--upstream", "http://127.0.0.1:1").url // refused: nothing was sent
	resp, body = post(nowhere, "/ok", "Bearer alice", "k-1")
	requireAdvice(t, resp, body, http.StatusBadGateway, "upstream-unavailable", "true")
}

func requireAdvice(t *testing.T, resp *http.Response, body string, status int, problem, shouldRetry string) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, body)
	require.Contains(t, body, "#"+problem)
	require.Equal(t, shouldRetry, resp.Header.Get(idem.HeaderShouldRetry), "%s: %s", problem, body)
}
