package main_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestOperable: one log line per guarded request (never the key), a WARN
// line when a key's outcome becomes unknown, the library's metrics and
// the gateway's on the admin listener with /healthz and /readyz, and
// start, drain and stop lines.
func TestOperable(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGatewayWith(t, "--upstream", up.url, "--upstream-timeout", "500ms", "--metrics-addr", "127.0.0.1:0")
	admin := regexp.MustCompile(`admin=(http://\S+)`).FindStringSubmatch(gw.stderr.String())
	require.NotNil(t, admin, gw.stderr.String())

	require.Equal(t, 201, post(t, gw.url, "/ok", "Bearer alice", "k-secret-op").status)
	require.Equal(t, 201, post(t, gw.url, "/ok", "Bearer alice", "k-secret-op").status)
	require.Equal(t, 409, post(t, gw.url, "/die", "Bearer alice", "k-secret-die").status)

	get := func(path string) (int, string) {
		resp, err := http.Get(admin[1] + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	require.Equal(t, 200, code)
	require.Contains(t, body, `idem_requests_total{outcome="executed",route="POST /*"} 2`)
	require.Contains(t, body, `idem_requests_total{outcome="replayed",route="POST /*"} 1`)
	require.Contains(t, body, `idem_gateway_outcome_unknown_total{route="POST /*"} 1`)
	require.Contains(t, body, `idem_store_operation_duration_seconds`)
	for _, path := range []string{"/healthz", "/readyz"} {
		code, _ = get(path)
		require.Equal(t, 200, code, path)
	}

	require.NoError(t, gw.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-gw.exited:
	case <-time.After(time.Minute):
		t.Fatal("idem-gateway did not stop within a minute of SIGTERM")
	}
	log := gw.stderr.String()
	require.NotContains(t, log, "k-secret", "a key is logged by its hash only")
	require.NotContains(t, log, "Bearer alice")
	require.Regexp(t, `level=INFO msg=request route="POST /\*" outcome=executed status=201 key_hash=[0-9a-f]{16} duration=`, log)
	require.Regexp(t, `level=INFO msg=request route="POST /\*" outcome=replayed status=201 key_hash=`, log)
	require.Regexp(t, `level=WARN msg="outcome unknown" route="POST /\*" scope=[0-9a-f]{64} key_hash=[0-9a-f]{16} upstream=127.0.0.1:\d+ cause=reset reason=`, log)
	require.Regexp(t, `level=INFO msg=request route="POST /\*" outcome=unknown status=409 key_hash=`, log)
	for _, line := range []string{`msg="key store ready"`, "msg=listening", `msg="shutting down: draining in-flight requests"`, "msg=stopped"} {
		require.Contains(t, log, line)
	}
	require.Equal(t, 1, strings.Count(log, "msg=stopped"))
}
