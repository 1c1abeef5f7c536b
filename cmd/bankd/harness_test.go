package main_test

// The tests drive the real bankd binary over real HTTP, each bank on a
// SQLite file of its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// binary is the bankd built once for all tests, with the race detector
// when the tests have it.
var binary string

func TestMain(m *testing.M) { os.Exit(proctest.Run(m, "bankd", &binary)) }

// bank is a running bankd.
type bank struct {
	url    string
	db     string
	cmd    *exec.Cmd
	stderr *proctest.Buffer
	exited chan struct{} // closed when the process has exited
	err    error         // the process's exit, once exited is closed
}

var listening = regexp.MustCompile(`(?m)^bankd: listening on (http://\S+)$`)

// stateTimeout bounds every wait for a state: generous, since the machines
// are shared; a healthy run never comes near it.
const stateTimeout = 60 * time.Second

// newDB returns a fresh database path in the test's temp dir.
func newDB(t *testing.T) string { return filepath.Join(t.TempDir(), "bank.db") }

// startBank starts `bankd --addr 127.0.0.1:0 --db db args…` and waits for
// its listening line. The bank is stopped when the test ends, and the test
// fails if the race detector spoke.
func startBank(t *testing.T, db string, args ...string) *bank {
	t.Helper()
	return startBankWith(t, db, append([]string{"--addr", "127.0.0.1:0", "--db", db}, args...))
}

// startBankWith starts bankd with the command line argv, which must name
// db and a free port, and waits for its listening line.
func startBankWith(t *testing.T, db string, argv []string) *bank {
	t.Helper()
	b := &bank{db: db, stderr: &proctest.Buffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(binary, argv...)
	b.cmd.Stderr = b.stderr
	require.NoError(t, b.cmd.Start())
	go func() {
		b.err = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		b.kill()
		if strings.Contains(b.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in bankd:\n%s", b.stderr.String())
		}
	})
	b.url = waitFor(t, b, func() (string, bool) {
		m := listening.FindStringSubmatch(b.stderr.String())
		if m == nil {
			return "", false
		}
		return m[1], true
	}, "the listening line")
	return b
}

// waitFor polls cond until it holds, failing the test if the bank exits
// first or stateTimeout passes.
func waitFor[T any](t *testing.T, b *bank, cond func() (T, bool), what string) T {
	t.Helper()
	deadline := time.After(stateTimeout)
	for {
		if v, ok := cond(); ok {
			return v
		}
		select {
		case <-b.exited:
			t.Fatalf("bankd exited (%v) while the test waited for %s:\n%s", b.err, what, b.stderr.String())
		case <-deadline:
			t.Fatalf("no %s within %v:\n%s", what, stateTimeout, b.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and requires a clean exit.
func (b *bank) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-b.exited:
		require.NoError(t, b.err, "bankd's exit after SIGTERM:\n%s", b.stderr.String())
	case <-time.After(stateTimeout):
		t.Fatalf("bankd did not exit within %v of SIGTERM:\n%s", stateTimeout, b.stderr.String())
	}
}

// kill sends SIGKILL, if the bank still runs, and waits for its exit.
func (b *bank) kill() {
	select {
	case <-b.exited:
		return
	default:
	}
	_ = b.cmd.Process.Kill()
	<-b.exited
}

// restart stops the bank and starts it again on the same database with
// args (no faults unless they say so).
func (b *bank) restart(t *testing.T, args ...string) *bank {
	t.Helper()
	b.stop(t)
	return startBank(t, b.db, args...)
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (r reply) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

// problemType is the fragment of a problem response's type.
func (r reply) problemType(t *testing.T) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "%s", r)
	var p struct{ Type string }
	require.NoError(t, json.Unmarshal(r.body, &p), "%s", r)
	_, name, _ := strings.Cut(p.Type, "#")
	return name
}

// transfer is a transfer as the bank shows it.
type transfer struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Destination    string `json:"destination"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
}

func (r reply) transfer(t *testing.T) transfer {
	t.Helper()
	require.Equal(t, "application/json", r.header.Get("Content-Type"), "%s", r)
	var tr transfer
	require.NoError(t, json.Unmarshal(r.body, &tr), "%s", r)
	return tr
}

var client = &http.Client{Timeout: stateTimeout}

// send posts a transfer request with key ("" for none) through c.
func (b *bank) send(ctx context.Context, c *http.Client, key, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/v1/transfers", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return roundTrip(c, req)
}

// post sends a transfer request that must get an answer.
func (b *bank) post(t *testing.T, key, body string) reply {
	t.Helper()
	r, err := b.send(context.Background(), client, key, body)
	require.NoError(t, err)
	return r
}

func (b *bank) get(t *testing.T, path string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	r, err := roundTrip(client, req)
	require.NoError(t, err)
	return r
}

func roundTrip(c *http.Client, req *http.Request) (reply, error) {
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// list returns the transfers of GET path ("/v1/transfers?…").
func (b *bank) list(t *testing.T, path string) []transfer {
	t.Helper()
	r := b.get(t, path)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var out struct{ Transfers []transfer }
	require.NoError(t, json.Unmarshal(r.body, &out), "%s", r)
	require.NotNil(t, out.Transfers, "%s", r)
	return out.Transfers
}

// byKey returns the transfers recorded under key: none or one.
func (b *bank) byKey(t *testing.T, key string) []transfer {
	t.Helper()
	return b.list(t, "/v1/transfers?idempotency_key="+key)
}

// body is a transfer request's JSON.
func body(amount int64, destination string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"USD","destination":%q}`, amount, destination)
}
