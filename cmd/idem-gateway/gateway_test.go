package main_test

// The gateway runs as a real process in front of a real upstream written
// in Python (testdata/upstream.py), over real HTTP, on a SQLite file.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Run(m, "idem-gateway", &binary)) }

type upstream struct {
	url     string
	release io.WriteCloser // a line releases every /slow request
}

// startUpstream starts the Python upstream and waits for its port.
func startUpstream(t *testing.T, args ...string) *upstream {
	t.Helper()
	return startProgram(t, "python3", append([]string{"testdata/upstream.py"}, args...)...)
}

// startProgram starts an upstream program that prints its port.
func startProgram(t *testing.T, name string, args ...string) *upstream {
	t.Helper()
	cmd := exec.Command(name, args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the upstream printed no port")
	return &upstream{url: "http://127.0.0.1:" + strings.TrimSpace(port), release: stdin}
}

type entry struct {
	Path, Key string
	Ran       bool // run, not answered from an earlier run
}

// log is what the upstream received.
func (u *upstream) log(t *testing.T) []entry {
	t.Helper()
	resp, err := http.Get(u.url + "/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var es []entry
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&es))
	return es
}

var listening = regexp.MustCompile(`msg=listening url=(http://\S+) `)

// startGateway starts idem-gateway in front of up and waits until it listens.
func startGateway(t *testing.T, up *upstream, args ...string) string {
	t.Helper()
	return startGatewayWith(t, append([]string{"--upstream", up.url, "--upstream-timeout", "500ms"}, args...)...).url
}

// gatewayProc is a running idem-gateway.
type gatewayProc struct {
	url    string
	stderr *proctest.Buffer
	cmd    *exec.Cmd
	exited chan struct{}
}

// startGatewayWith starts idem-gateway with args and waits until it listens.
func startGatewayWith(t *testing.T, args ...string) *gatewayProc {
	t.Helper()
	stderr := &proctest.Buffer{}
	cmd := exec.Command(binary, append([]string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "keys.db")}, args...)...)
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		require.NotContains(t, stderr.String(), "DATA RACE")
	})
	deadline := time.After(60 * time.Second)
	for {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return &gatewayProc{url: m[1], stderr: stderr, cmd: cmd, exited: exited}
		}
		select {
		case <-exited:
			t.Fatalf("idem-gateway exited:\n%s", stderr.String())
		case <-deadline:
			t.Fatalf("idem-gateway did not listen within 60s:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type reply struct {
	status   int
	body     string
	replayed bool
}

func post(t *testing.T, gw, path, auth, key string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gw+path, strings.NewReader(`{"amount":100}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"}
}

func TestGateway(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	gw := startGateway(t, up)
	t.Cleanup(func() { _, _ = io.WriteString(up.release, "go\n") })

	t.Run("ReplayedNotRerun", func(t *testing.T) {
		first := post(t, gw, "/ok", "Bearer alice", "k-ok")
		require.Equal(t, reply{201, `{"runs": 1}`, false}, first)
		again := post(t, gw, "/ok", "Bearer alice", "k-ok")
		require.Equal(t, reply{201, `{"runs": 1}`, true}, again)
		bob := post(t, gw, "/ok", "Bearer bob", "k-ok")
		require.Equal(t, 201, bob.status, "another scope is another key space")
		require.False(t, bob.replayed)
	})
	t.Run("FailureFreesTheKey", func(t *testing.T) {
		require.Equal(t, 500, post(t, gw, "/fail", "Bearer alice", "k-fail").status)
		require.Equal(t, 500, post(t, gw, "/fail", "Bearer alice", "k-fail").status)
	})
	for _, path := range []string{"/slow", "/die"} {
		t.Run("OutcomeUnknown"+path, func(t *testing.T) {
			r := post(t, gw, path, "Bearer alice", "k-unknown"+path)
			require.Equal(t, 409, r.status, r.body)
			require.Contains(t, r.body, "#outcome-unknown")
			again := post(t, gw, path, "Bearer alice", "k-unknown"+path)
			require.Equal(t, r.body, again.body)
			require.True(t, again.replayed, "a retry must not run it again")
		})
	}
	t.Run("Unscoped", func(t *testing.T) {
		require.Equal(t, 401, post(t, gw, "/ok", "", "k-anon").status)
	})
	t.Run("EmptyJSONBody", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, gw+"/ok", http.NoBody)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", "k-empty")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 400, resp.StatusCode, "%s", b)
		require.Contains(t, string(b), "#body-invalid", "malformed JSON, nothing stored nor forwarded")
	})
	t.Run("TargetNotUTF8", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST /ok?note=\xff HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice\r\nIdempotency-Key: k-target\r\n"+
			"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, 400, resp.StatusCode, "%s", b)
		require.Contains(t, string(b), "#target-invalid", "nothing stored nor forwarded")
	})

	// What the upstream saw: each request once, with a derived key.
	counts := map[string]int{}
	keys := map[string]bool{}
	for _, e := range up.log(t) {
		counts[e.Path]++
		keys[e.Key] = true
		require.Regexp(t, `^[0-9a-f]{32}$`, e.Key, "the forwarded key is derived, not the client's")
	}
	require.Equal(t, map[string]int{"/ok": 2, "/fail": 2, "/slow": 1, "/die": 1}, counts)
	require.Len(t, keys, 5, "alice's and bob's k-ok differ; /fail's two attempts share one")
}

// TestGatewayDedupingUpstream: with --upstream-dedups, an unknown outcome
// is not stored; the retry is sent again with the same derived key.
func TestGatewayDedupingUpstream(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, "--dedup")
	gw := startGateway(t, up, "--upstream-dedups")
	r := post(t, gw, "/die", "Bearer alice", "k1")
	require.Equal(t, 502, r.status, r.body)
	require.Contains(t, r.body, "#upstream-unavailable")
	require.Equal(t, reply{201, `{"runs": 2}`, false}, post(t, gw, "/die", "Bearer alice", "k1"))
	log := up.log(t)
	require.Len(t, log, 2)
	require.Equal(t, log[0].Key, log[1].Key)
}

// writeFile writes content to a new file of the test and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// gatewayCmd runs idem-gateway with args and returns its output and exit
// code. A command that has not ended within two minutes (a serve that
// should have refused to start) is killed: code -1.
func gatewayCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee)
		code = ee.ExitCode()
	}
	return out.String(), errOut.String(), code
}

// TestOperatorResolvesUnknownOutcomes: keys list finds the outcome-unknown
// keys; keys resolve reopens one, whose retry then runs, and answers
// another, whose retry gets that answer without running.
func TestOperatorResolvesUnknownOutcomes(t *testing.T) {
	t.Parallel()
	for name, kdb := range keyDBs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testOperatorResolves(t, kdb)
		})
	}
}

// pgDB is a fresh PostgreSQL schema's --db; on Citus (make test-citus)
// its key table is distributed first, as an operator does with migrate
// --citus.
func pgDB(t testing.TB) string {
	t.Helper()
	db := pgtest.SchemaURL(t, pgtest.Schema(t))
	if pgtest.Citus() {
		out, err := exec.Command(binary, "migrate", "--citus", "--db", db).CombinedOutput()
		require.NoError(t, err, "idem-gateway migrate --citus: %s", out)
	}
	return db
}

// keyDB is a kind of key store the keys commands are tested on.
type keyDB struct {
	new   func(t testing.TB) string                 // a fresh database's --db
	audit func(t *testing.T, db string) store.Store // its audit log, once migrated
}

// keyDBs are SQLite's, PostgreSQL's (distributed on Citus in make
// test-citus), and MySQL's with -tags mysql (make test-mysql).
var keyDBs = map[string]keyDB{"SQLite": {
	new: func(t testing.TB) string { return filepath.Join(t.TempDir(), "keys.db") },
	audit: func(t *testing.T, db string) store.Store {
		sdb, err := sqlitestore.Open(db)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sdb.Close() })
		return sqlitestore.New(sdb)
	},
}, "PostgreSQL": {
	new: pgDB,
	audit: func(t *testing.T, db string) store.Store {
		pool, err := pgxpool.New(context.Background(), db)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pgstore.New(pool)
	},
}}

func testOperatorResolves(t *testing.T, kdb keyDB) {
	up := startUpstream(t)
	db := kdb.new(t)
	gw := startGateway(t, up, "--db", db)
	for _, k := range []string{"k-reopen", "k-answer"} {
		require.Equal(t, 409, post(t, gw, "/die", "Bearer alice", k).status)
	}
	require.Equal(t, 201, post(t, gw, "/ok", "Bearer alice", "k-ok").status)

	out, stderr, code := gatewayCmd(t, "", "keys", "list", "--db", db)
	require.Equal(t, 0, code, stderr)
	var listed []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		listed = append(listed, m)
	}
	require.Len(t, listed, 2, out)
	scope := listed[0]["scope"].(string)
	for _, m := range listed {
		require.Equal(t, true, m["outcome_unknown"])
		require.Equal(t, "POST /die", m["request"])
		require.Equal(t, scope, m["scope"])
		require.NotContains(t, fmt.Sprint(m), "Bearer", "the scope is a hash, not the credential")
	}

	out, stderr, code = gatewayCmd(t, "", "keys", "show", "--db", db, "--scope", scope, "--key", "k-reopen")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"response_code":409`)
	require.Contains(t, out, `"completed_at":`)

	out, stderr, code = gatewayCmd(t, "", "keys", "resolve", "--db", db, "--scope", scope, "--key", "k-reopen", "--reopen",
		"--reason", "upstream log: no request under this key")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"resolution":"reopened"`)
	out, stderr, code = gatewayCmd(t, "", "keys", "show", "--db", db, "--scope", scope, "--key", "k-reopen")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, `"completed_at"`, "reopened: no longer completed")
	require.Equal(t, reply{201, `{"runs": 2}`, false}, post(t, gw, "/die", "Bearer alice", "k-reopen"), "reopened: the retry runs")

	_, stderr, code = gatewayCmd(t, `{"runs": 1}`, "keys", "resolve", "--db", db, "--scope", scope, "--key", "k-answer",
		"--status", "201", "--body-file", "-", "--reason", "upstream log: order 1 created")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, reply{201, `{"runs": 1}`, true}, post(t, gw, "/die", "Bearer alice", "k-answer"), "answered: the retry gets it")

	for _, k := range []string{"k-ok", "k-reopen", "k-answer", "k-unused"} {
		_, stderr, code = gatewayCmd(t, "", "keys", "resolve", "--db", db, "--scope", scope, "--key", k, "--reopen", "--reason", "INC-7")
		require.Equal(t, 1, code, "%s is not an unknown outcome: %s", k, stderr)
	}
	out, _, code = gatewayCmd(t, "", "keys", "list", "--db", db)
	require.Equal(t, 0, code)
	require.Empty(t, out)

	// Each resolve wrote its audit entry, as the console's actions do;
	// the refused ones wrote none.
	entries, err := kdb.audit(t, db).ListAudit(t.Context(), store.KeyRef{}, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	answered, reopened := entries[0], entries[1] // newest first
	require.Equal(t, "resolve: reopened", reopened.Action)
	require.Equal(t, "upstream log: no request under this key", reopened.Reason)
	require.Equal(t, "k-reopen", reopened.Key)
	require.Contains(t, reopened.Actor, "idem-gateway keys resolve, ")
	require.Contains(t, reopened.Before, "COMPLETED (outcome unknown) ")
	require.Contains(t, reopened.After, "FAILED ")
	require.Equal(t, "resolve: answered", answered.Action)
	require.Equal(t, "k-answer", answered.Key)
	require.Contains(t, answered.After, "response=201 application/json (11 bytes)")

	counts := map[string]int{}
	for _, e := range up.log(t) {
		counts[e.Path]++
	}
	require.Equal(t, map[string]int{"/ok": 1, "/die": 3}, counts, "k-answer ran once; k-reopen twice, once reopened")
}

// TestUpstreamActedAnswerLost: the upstream acted, but the gateway stored
// no answer: the upstream cut its response short after the headers, or
// the completion's write failed. A non-deduplicating upstream must never
// get the key again: the retry finds the key held until its lease runs
// out, then the stored outcome-unknown answer.
func TestUpstreamActedAnswerLost(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	path := filepath.Join(t.TempDir(), "keys.db")
	gw := startGateway(t, up, "--db", path, "--lease-duration", "1s")
	db, err := sqlitestore.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()

	// Every completion of k-complete-fails fails, as a broken link to
	// the database would make it.
	_, err = db.ExecContext(ctx, `CREATE TRIGGER completion_fails BEFORE UPDATE OF status ON idempotency_keys
		WHEN NEW.status = 'COMPLETED' AND NEW.idempotency_key = 'k-complete-fails'
		BEGIN SELECT RAISE(ABORT, 'the test fails this completion'); END`)
	require.NoError(t, err)
	r := post(t, gw, "/ok", "Bearer alice", "k-complete-fails")
	require.Equal(t, 503, r.status, r.body)
	_, err = db.ExecContext(ctx, `DROP TRIGGER completion_fails`)
	require.NoError(t, err)

	req, err := http.NewRequest(http.MethodPost, gw+"/cut", strings.NewReader(`{"amount":100}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Idempotency-Key", "k-cut")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NotEqual(t, 201, resp.StatusCode, "a cut response is not an answer: %s", b)
	}

	for _, c := range []struct{ path, key string }{{"/ok", "k-complete-fails"}, {"/cut", "k-cut"}} {
		var last reply
		require.Eventually(t, func() bool {
			last = post(t, gw, c.path, "Bearer alice", c.key)
			require.Equal(t, 409, last.status, last.body)
			return strings.Contains(last.body, "#outcome-unknown")
		}, time.Minute, 20*time.Millisecond, "the retry is in flight until the lease runs out, then outcome-unknown")
		again := post(t, gw, c.path, "Bearer alice", c.key)
		require.Equal(t, reply{409, last.body, true}, again, "the outcome-unknown answer is stored")
	}
	counts := map[string]int{}
	for _, e := range up.log(t) {
		counts[e.Path]++
	}
	require.Equal(t, map[string]int{"/ok": 1, "/cut": 1}, counts, "each request reached the upstream once")
}
