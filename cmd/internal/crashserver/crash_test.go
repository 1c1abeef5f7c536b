package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/pgstore/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "crashserver")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "crashserver")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build crashserver: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestSIGKILLNeverMovesMoneyTwice kills a real server process at each point
// of a request, in both modes, restarts it, retries the same key until it
// gets a final answer, and counts the business effects: exactly one, every
// time.
func TestSIGKILLNeverMovesMoneyTwice(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"atomic", "leased"} {
		for _, point := range []string{"claimed", "handler", "written", "committed"} {
			t.Run(strings.ToUpper(mode[:1])+mode[1:]+"/"+point, func(t *testing.T) {
				t.Parallel()
				schema := pgtest.Schema(t)
				db := pgtest.SchemaURL(t, schema)
				key := "crash-" + mode + "-" + point

				crashing := start(t, db, mode, "--crash-at", point)
				_, err := post(crashing.url, key)
				require.Error(t, err, "the server dies before it answers")
				crashing.requireKilled(t)

				server := start(t, db, mode)
				first := retryUntilFinal(t, server.url, key)
				require.Equal(t, http.StatusCreated, first.status, "body: %s", first.body)
				if point == "committed" {
					require.Equal(t, "true", first.replayed, "committed before the crash: the retry replays")
				} else {
					require.Empty(t, first.replayed, "nothing committed before the crash: the retry executes")
				}
				again, err := post(server.url, key)
				require.NoError(t, err)
				require.Equal(t, first.body, again.body)
				require.Equal(t, "true", again.replayed)

				conn, err := pgx.Connect(context.Background(), db)
				require.NoError(t, err)
				defer conn.Close(context.Background())
				var payments, balance int64
				require.NoError(t, conn.QueryRow(context.Background(),
					`SELECT count(*) FROM payments WHERE idempotency_key = $1`, key).Scan(&payments))
				require.NoError(t, conn.QueryRow(context.Background(),
					`SELECT balance FROM accounts WHERE user_id = 'alice'`).Scan(&balance))
				require.Equal(t, int64(1), payments, "exactly one business effect")
				require.Equal(t, int64(100), balance, "money moved exactly once")
			})
		}
	}
}

type process struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

func start(t *testing.T, db, mode string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--db", db, "--mode", mode, "--lease-duration", "1s"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, done: make(chan error, 1)}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the server did not start")
	p.url = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// requireKilled waits for the process to die of SIGKILL.
func (p *process) requireKilled(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		exitErr, ok := errors.AsType[*exec.ExitError](err)
		require.True(t, ok, "exit: %v", err)
		status, ok := exitErr.Sys().(syscall.WaitStatus)
		require.True(t, ok)
		require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL, "exit: %v", err)
	case <-time.After(patience):
		t.Fatal("the server did not die")
	}
}

// patience bounds every wait for a state: generous, so that a slow, shared
// machine still passes; a test that meets its state returns at once.
const patience = time.Minute

type answer struct {
	status     int
	body       string
	replayed   string
	retryAfter string
}

func post(url, key string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/payments", strings.NewReader(`{"amount":100}`))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-User", "alice")
	client := http.Client{Timeout: patience}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed"), resp.Header.Get("Retry-After")}, err
}

// retryUntilFinal retries like an SDK: a 409 with Retry-After is retried
// after it (here, until the crashed attempt's lease expires).
func retryUntilFinal(t *testing.T, url, key string) answer {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		a, err := post(url, key)
		require.NoError(t, err)
		if a.status != http.StatusConflict || time.Now().After(deadline) {
			return a
		}
		wait, err := strconv.Atoi(a.retryAfter)
		require.NoError(t, err, "a 409 for a request in flight carries Retry-After")
		time.Sleep(time.Duration(wait) * time.Second)
	}
}
