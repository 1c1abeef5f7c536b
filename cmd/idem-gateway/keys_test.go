package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestKeysListStates: keys list finds the keys in each state an operator
// looks for (an unknown outcome, in flight, failed), newest first, within
// --since and --limit, on PostgreSQL and on SQLite, and never prints a
// body.
func TestKeysListStates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"PostgreSQL", func(t *testing.T) string { return pgDB(t) }},
		{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "keys.db") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := startUpstream(t)
			db := c.db(t)
			gw := startGatewayWith(t, "--upstream", up.url, "--upstream-timeout", "1m", "--db", db).url
			require.Equal(t, 409, post(t, gw, "/die", "Bearer alice", "k-unknown").status)
			require.Equal(t, 500, post(t, gw, "/fail", "Bearer alice", "k-failed-1").status)
			require.Equal(t, 500, post(t, gw, "/fail", "Bearer alice", "k-failed-2").status)
			require.Equal(t, 201, post(t, gw, "/ok", "Bearer alice", "k-ok").status)
			slow := make(chan reply, 1)
			go func() { slow <- post(t, gw, "/slow", "Bearer alice", "k-slow") }()

			list := func(args ...string) []map[string]any {
				t.Helper()
				out, stderr, code := gatewayCmd(t, "", append([]string{"keys", "list", "--db", db}, args...)...)
				require.Equal(t, 0, code, stderr)
				require.NotContains(t, out, "runs", "never a response body")
				require.NotContains(t, out, "may or may not", "never a response body")
				require.NotContains(t, out, "amount", "never a request body")
				var listed []map[string]any
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					if line == "" {
						continue
					}
					var m map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &m), line)
					listed = append(listed, m)
				}
				return listed
			}
			keys := func(listed []map[string]any) []string {
				var ks []string
				for _, m := range listed {
					ks = append(ks, m["key"].(string))
				}
				return ks
			}

			// The slow request is in flight once the gateway has claimed
			// its key: wait for that state.
			deadline := time.Now().Add(30 * time.Second)
			var inFlight []map[string]any
			for len(inFlight) == 0 && time.Now().Before(deadline) {
				inFlight = list("--state", "in-flight")
			}
			require.Equal(t, []string{"k-slow"}, keys(inFlight))
			require.Equal(t, "PROCESSING", inFlight[0]["status"])
			require.Equal(t, true, inFlight[0]["lease_live"], "a gateway holds it")
			require.Equal(t, "POST /slow", inFlight[0]["request"])

			unknown := list()
			require.Equal(t, []string{"k-unknown"}, keys(unknown), "--state unknown is the default")
			require.Equal(t, true, unknown[0]["outcome_unknown"])
			require.Equal(t, []string{"k-unknown"}, keys(list("--state", "unknown", "--since", "1h")))

			failed := list("--state", "failed")
			require.Equal(t, []string{"k-failed-2", "k-failed-1"}, keys(failed), "newest first")
			require.Equal(t, "FAILED", failed[0]["status"])
			require.Equal(t, []string{"k-failed-2"}, keys(list("--state", "failed", "--limit", "1")))
			require.Empty(t, list("--state", "failed", "--since", "1ns"), "none first used in the last nanosecond")

			_, err := up.release.Write([]byte("\n"))
			require.NoError(t, err)
			require.Equal(t, 201, (<-slow).status)
			require.Empty(t, list("--state", "in-flight"), "completed: no longer in flight")
		})
	}
}

// TestSweepKeepsUnknownOutcomes: the built-in sweeper and keys sweep
// delete the records past their retention, but never one whose upstream
// outcome is unknown: it waits for an operator, however old. Once
// resolved, it goes like any other. On PostgreSQL and on SQLite.
func TestSweepKeepsUnknownOutcomes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"PostgreSQL", func(t *testing.T) string { return pgDB(t) }},
		{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "keys.db") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := startUpstream(t)
			db := c.db(t)
			gw := startGatewayWith(t, "--upstream", up.url, "--upstream-timeout", "1m", "--db", db,
				"--idempotency-ttl", "1ms", "--sweep-interval", "20ms").url
			require.Equal(t, 409, post(t, gw, "/die", "Bearer alice", "k-unknown").status)
			require.Equal(t, 201, post(t, gw, "/ok", "Bearer alice", "k-ok").status)
			scope := scopeOf("Bearer alice")
			show := func(key string) (string, int) {
				out, _, code := gatewayCmd(t, "", "keys", "show", "--db", db, "--scope", scope, "--key", key)
				return out, code
			}
			swept := func(key string) {
				t.Helper()
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
					if _, code := show(key); code == 1 {
						return
					}
				}
				t.Fatalf("the sweeper never deleted %s", key)
			}

			swept("k-ok") // past its retention: the sweeper has run over both
			out, code := show("k-unknown")
			require.Equal(t, 0, code, "the unknown outcome survived the sweeper")
			require.Contains(t, out, `"outcome_unknown":true`)
			// The gateway's own sweeper runs every 20ms: a manual sweep that
			// meets it is refused, and is asked again.
			out, stderr, code := gatewayCmd(t, "", "keys", "sweep", "--db", db)
			for deadline := time.Now().Add(30 * time.Second); code != 0 && strings.Contains(stderr, "another sweep is running") &&
				time.Now().Before(deadline); {
				out, stderr, code = gatewayCmd(t, "", "keys", "sweep", "--db", db)
			}
			require.Equal(t, 0, code, stderr)
			require.Equal(t, `{"deleted":0}`+"\n", out, "keys sweep keeps it too")
			out, _, _ = gatewayCmd(t, "", "keys", "list", "--db", db)
			require.Contains(t, out, `"key":"k-unknown"`)
			retry := post(t, gw, "/die", "Bearer alice", "k-unknown")
			require.Equal(t, 409, retry.status, "a retry past retention gets the unknown outcome: %s", retry.body)
			require.True(t, retry.replayed, "never sent upstream again")

			// --release, reopen's deprecated name, still reopens, and warns.
			_, stderr, code = gatewayCmd(t, "", "keys", "resolve", "--db", db, "--scope", scope, "--key", "k-unknown", "--release", "--reason", "INC-9")
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stderr, "idem-gateway: --release is deprecated: use --reopen")
			swept("k-unknown") // resolved: a record like any other
		})
	}
}

// scopeOf is the gateway's scope of an Authorization value: its SHA-256.
func scopeOf(auth string) string {
	sum := sha256.Sum256([]byte(auth))
	return hex.EncodeToString(sum[:])
}
