package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// TestResolveSeenByCachingReplicas: two replicas on one PostgreSQL key
// store, their replay caches on, have both replayed an outcome-unknown
// answer; an operator resolves the key from a third process, and both
// replay the operator's answer at once. The caches keep only answers that
// never change (never outcome-unknown), so no replica holds a stale one.
func TestResolveSeenByCachingReplicas(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	db := pgDB(t)
	replicas := []string{startGateway(t, up, "--db", db), startGateway(t, up, "--db", db)}
	first := post(t, replicas[0], "/die", "Bearer alice", "k-unknown")
	require.Equal(t, 409, first.status, first.body)
	require.Contains(t, first.body, "#outcome-unknown")
	require.Equal(t, 201, post(t, replicas[0], "/ok", "Bearer alice", "k-ok").status)
	for _, gw := range replicas {
		for range 2 {
			require.Equal(t, reply{409, first.body, true}, post(t, gw, "/die", "Bearer alice", "k-unknown"))
			require.Equal(t, reply{201, `{"runs": 1}`, true}, post(t, gw, "/ok", "Bearer alice", "k-ok"))
		}
	}
	sum := sha256.Sum256([]byte("Bearer alice"))
	_, stderr, code := gatewayCmd(t, `{"runs": 1}`, "keys", "resolve", "--db", db, "--scope", hex.EncodeToString(sum[:]),
		"--key", "k-unknown", "--status", "201", "--body-file", "-", "--reason", "INC-8")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, `msg="key resolved"`)
	for _, gw := range replicas {
		require.Equal(t, reply{201, `{"runs": 1}`, true}, post(t, gw, "/die", "Bearer alice", "k-unknown"), "the operator's answer, not a cached 409")
	}
	require.Len(t, up.log(t), 2, "/die once, /ok once: every other answer was a replay")
}
