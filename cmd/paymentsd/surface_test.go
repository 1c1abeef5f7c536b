package main_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// TestMetricsListener: /metrics is served on --metrics-addr only; on the
// API's listener it is an unknown route.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"))
	require.True(t, strings.HasPrefix(s.metrics, "http://127.0.0.1:"), s.metrics)
	require.Contains(t, scrape(t, s), "go_goroutines")
	r := do(t, s, nil, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r)
}

// TestMetricsPortTaken: with the default metrics port taken, paymentsd
// warns and serves without metrics; an explicit --metrics-addr that
// cannot be bound still stops it. It is not parallel: no other test of
// this package runs while it holds the default port (the others give
// --metrics-addr, but a port one of them held for a moment could make
// this one's default free again).
func TestMetricsPortTaken(t *testing.T) {
	// Whether this test holds the default port or something else already
	// does, it is taken.
	if ln, err := net.Listen("tcp", "127.0.0.1:9464"); err == nil {
		t.Cleanup(func() { _ = ln.Close() })
	}
	db := newDB(t, "sqlite")
	stderr := &proctest.Buffer{}
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--db", db)
	cmd.Env, cmd.Stderr = env(), stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitFor(t, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("paymentsd exited (%v):\n%s", err, stderr)
		default:
		}
		return listening.MatchString(stderr.String())
	}, "paymentsd's listening line: %s", stderr)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited)
	require.Contains(t, stderr.String(), `level=WARN msg="serving no metrics: the default --metrics-addr cannot be bound`)
	require.Contains(t, stderr.String(), "metrics=off")

	// An explicit address, on a port this test holds.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Close() })
	addr := held.Addr().String()
	_, errOut, code := runCLI(t, env(), "serve", "--addr", "127.0.0.1:0", "--db", db, "--metrics-addr", addr)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "listen on "+addr+" (--metrics-addr)")
}

// TestFilesOwnerOnly: the SQLite files of paymentsd and bankd (databases,
// WAL and shared memory) are created readable by their owner only, and a
// secret file others may read draws a warning.
func TestFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bank := startBank(t, filepath.Join(dir, "bank.db"))
	secret := filepath.Join(dir, "bank-key-secret")
	require.NoError(t, os.WriteFile(secret, []byte("a secret of the files test, long enough\n"), 0o644))
	db := filepath.Join(dir, "paymentsd.db")
	s := startServer(t, db, "--bank-url", bank.url, "--bank-key-secret-file", secret)
	u := s.newUser(t)
	u.deposit(t, "USD", 100)
	require.Equal(t, http.StatusCreated, u.post(t, "/v1/payouts", newKey(), `{"currency":"USD","amount":10,"destination":"acct-1"}`).status)
	for _, name := range []string{"paymentsd.db", "paymentsd.db-wal", "paymentsd.db-shm", "bank.db", "bank.db-wal", "bank.db-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
	require.Contains(t, s.stderr.String(), `level=WARN msg="a file holding a secret is readable by others than its owner; chmod 600 it" flag=--bank-key-secret-file path=`+secret+` mode=-rw-r--r--`)
}

// TestLogFormatJSON: with --log-format json every line serve prints on
// stderr is a JSON object, the listening line and the last error included.
func TestLogFormatJSON(t *testing.T) {
	t.Parallel()
	db := newDB(t, "sqlite")
	s := startIn(t, "", env(), "serve", "--addr", "127.0.0.1:0", "--db", db, "--log-format", "json")
	u := s.newUser(t)
	require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":100}`).status)
	// The same port again: the second process fails to bind, and says so
	// in JSON too.
	_, errOut, code := runCLI(t, env(), "serve", "--addr", strings.TrimPrefix(s.url, "http://"), "--db", db, "--log-format", "json", "--metrics-addr", "")
	require.Equal(t, 1, code)
	s.stop(t)
	for _, out := range []string{s.stderr.String(), errOut} {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.NotEmpty(t, lines)
		for _, line := range lines {
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &v), "not JSON: %q", line)
			require.Contains(t, v, "msg")
		}
	}
	require.Contains(t, s.stderr.String(), `"msg":"listening","url":"`+s.url+`"`)
	require.Contains(t, errOut, "address already in use")
}

// TestUpperCaseID: both stores find a deposit and a transaction by their
// id in upper case, the same as in lower case.
func TestUpperCaseID(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, newDB(t, store))
			u := s.newUser(t)
			dep := u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":1000}`)
			require.Equal(t, http.StatusCreated, dep.status)
			tr := u.post(t, "/v1/transactions", newKey(), `{"source_currency":"USD","target_currency":"EUR","amount":100}`)
			require.Equal(t, http.StatusCreated, tr.status)
			for path, created := range map[string]reply{"/v1/deposits/": dep, "/v1/transactions/": tr} {
				id := created.json(t)["id"].(string)
				got := u.get(t, path+strings.ToUpper(id))
				require.Equal(t, http.StatusOK, got.status, "%s%s: %s", path, strings.ToUpper(id), got)
				require.Equal(t, string(created.body), string(got.body))
			}
		})
	}
}
