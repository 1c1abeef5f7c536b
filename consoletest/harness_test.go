package consoletest

import (
	"bytes"
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
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// bin holds the commands under test, built once by TestMain.
var bin = map[string]string{}

// adminToken is every process's console token in these tests.
const adminToken = "console-e2e-admin-token-0123456789"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := exec.LookPath(chromium()); err != nil {
		fmt.Fprintf(os.Stderr, "consoletest: no Chromium (%s): install it (apt-get install chromium, or make test-console does) or set CHROMIUM\n", chromium())
		return 1
	}
	if os.Getenv("DATABASE_URL") == "" {
		fmt.Fprintln(os.Stderr, "consoletest: DATABASE_URL is not set: the PostgreSQL tests need a server (make test-console starts one)")
		return 1
	}
	dir, err := os.MkdirTemp("", "consoletest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"paymentsd", "idem-gateway", "bankd"} {
		bin[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bin[name], "../cmd/"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			return 1
		}
	}
	return m.Run()
}

// chromium is the browser the tests drive: $CHROMIUM, else Debian's.
func chromium() string {
	if c := os.Getenv("CHROMIUM"); c != "" {
		return c
	}
	return "chromium"
}

// buffer is what a process writes, read while it runs.
type buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a command under test, running.
type proc struct {
	cmd *exec.Cmd
	out *buffer
}

// start runs a command until the test ends.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin[name], args...), out: &buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop ends the process (SIGTERM, then waits) and logs its output when
// the test failed.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	if t.Failed() {
		t.Logf("%s output:\n%s", filepath.Base(p.cmd.Path), p.out.String())
	}
}

// await waits until the process has written a line matching re and
// returns its first submatch.
func (p *proc) await(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(p.out.String()); m != nil {
			return m[1]
		}
		if p.cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never printed %q; it printed:\n%s", filepath.Base(p.cmd.Path), re, p.out.String())
	return ""
}

// database returns a --db value for kind: a SQLite file, or a PostgreSQL
// database of its own, dropped when the test ends.
func database(t *testing.T, kind string) string {
	t.Helper()
	if kind == "sqlite" {
		return filepath.Join(t.TempDir(), "keys.db")
	}
	ctx := context.Background()
	admin := os.Getenv("DATABASE_URL")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("PostgreSQL at DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "console_e2e_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// tokenFile writes the admin token into a file of the test's.
func tokenFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "console-token")
	if err := os.WriteFile(path, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// call sends a request and returns the response with its body read.
func call(t *testing.T, method, url string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// jsonField returns a top-level string field of a JSON object.
func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, body)
	}
	s, _ := v[field].(string)
	return s
}
