package clienttest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// python is Debian's interpreter, which has python3-requests; a python
// earlier on PATH (pyenv) may not.
const python = "/usr/bin/python3"

// bin holds the commands under test, built once by TestMain.
var bin = map[string]string{}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, check := range []struct {
		cmd  *exec.Cmd
		hint string
	}{
		{exec.Command(python, "-c", "import requests, urllib3"), "apt-get install python3-requests"},
		{exec.Command("node", "-e", "import('axios-retry')"), "npm ci in clienttest/node"},
	} {
		check.cmd.Dir = "node"
		if out, err := check.cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "clienttest: %v: %v: %s(make test-clients does: %s)\n", check.cmd.Args, err, out, check.hint)
			return 1
		}
	}
	if os.Getenv("DATABASE_URL") == "" {
		fmt.Fprintln(os.Stderr, "clienttest: DATABASE_URL is not set: the tests need PostgreSQL (make test-clients starts one)")
		return 1
	}
	dir, err := os.MkdirTemp("", "clienttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"paymentsd", "idem-gateway"} {
		bin[name] = filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", bin[name], "../cmd/"+name).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			return 1
		}
	}
	return m.Run()
}

// proc is a process under test, its output collected.
type proc struct {
	cmd *exec.Cmd
	out *proctest.Buffer
}

// start runs a process until the test ends, and waits until its output
// matches ready, whose first submatch it returns.
func start(t *testing.T, ready string, name string, args ...string) (*proc, string) {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), out: &proctest.Buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s said:\n%s", filepath.Base(name), p.out.String())
		}
	})
	rx := regexp.MustCompile(ready)
	var m []string
	require.Eventually(t, func() bool {
		m = rx.FindStringSubmatch(p.out.String())
		return m != nil
	}, 2*time.Minute, 20*time.Millisecond, "%s never printed %q", name, ready)
	return p, m[1]
}

// database returns the URL of a PostgreSQL database of its own, dropped
// when the test ends.
func database(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin := os.Getenv("DATABASE_URL")
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err, "PostgreSQL at DATABASE_URL")
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "clients_" + hex.EncodeToString(b)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, err = c.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
		require.NoError(t, err)
	})
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// paymentsd is a running paymentsd and one user's API key.
type paymentsd struct {
	url, auth string
}

// startPaymentsd runs paymentsd in leased mode, where a duplicate of a
// request in flight gets 409 in-flight, on a database of its own, with
// one user.
func startPaymentsd(t *testing.T) paymentsd {
	t.Helper()
	db := database(t)
	out, err := exec.Command(bin["paymentsd"], "users", "create", "--db", db).Output()
	require.NoError(t, err)
	var u struct {
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal(out, &u), string(out))
	_, addr := start(t, `msg=listening url=(http://\S+)`, bin["paymentsd"], "--addr", "127.0.0.1:0", "--metrics-addr", "",
		"--db", db, "--idempotency-mode", "leased")
	return paymentsd{url: addr, auth: "Bearer " + u.APIKey}
}

// balance is the user's balance in currency, in minor units.
func (p paymentsd) balance(t *testing.T, currency string) int64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url+"/v1/balances", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", p.auth)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b struct {
		Balances []struct {
			Currency string
			Amount   int64
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
	for _, c := range b.Balances {
		if c.Currency == currency {
			return c.Amount
		}
	}
	return 0
}

// gateway is a running idem-gateway in front of the Python upstream of
// its own tests, which holds every POST /slow until released.
type gateway struct {
	url      string
	log      *proctest.Buffer // the gateway's log
	upstream *proc
	upURL    string
	release  io.WriteCloser // a line releases every /slow request
}

func startGateway(t *testing.T, db string) *gateway {
	t.Helper()
	up := exec.Command(python, "../cmd/idem-gateway/testdata/upstream.py")
	release, err := up.StdinPipe()
	require.NoError(t, err)
	stdout, err := up.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, up.Start())
	t.Cleanup(func() { _ = release.Close(); _ = up.Process.Kill(); _ = up.Wait() })
	port, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the upstream printed no port")
	upURL := "http://127.0.0.1:" + strings.TrimSpace(port)
	p, addr := start(t, `msg=listening url=(http://\S+)`, bin["idem-gateway"], "--addr", "127.0.0.1:0", "--metrics-addr", "",
		"--db", db, "--upstream", upURL, "--upstream-timeout", "2m")
	return &gateway{url: addr, log: p.out, upstream: &proc{cmd: up}, upURL: upURL, release: release}
}

// upstreamRequests is how many requests the upstream received.
func (g *gateway) upstreamRequests(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(g.upURL + "/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var log []json.RawMessage
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	return len(log)
}
