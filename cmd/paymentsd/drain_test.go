package main_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestDrain sends SIGTERM while a request is in flight: the server stops
// taking new connections, lets the request finish (its money moves and its
// key completes), then exits 0.
func TestDrain(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			// The held request waits for the test's lock for as long as the
			// test holds it, however slow the machine.
			s := startServer(t, newDB(t, store), "--wait-timeout", patience.String())
			u := s.newUser(t)
			u.deposit(t, "USD", 1000)

			// Hold the request inside the server: a balance row lock on
			// PostgreSQL and MySQL, the database's write lock on SQLite.
			var release func()
			if store != "sqlite" {
				release = lockBalances(t, s, u)
			} else {
				release = lockSQLite(t, s)
			}
			key := newKey()
			body := `{"currency":"USD","amount":250}`
			begun := storeOps(t, s, "begin")
			firstc := sendAsync(s, u, "/v1/deposits", body, key)
			if store != "sqlite" {
				waitForLockWait(t, s, 1)
			} else {
				// The request has begun its transaction; its first
				// statement waits for the write lock.
				waitFor(t, func() bool { return storeOps(t, s, "begin") > begun }, "the request never began its transaction")
			}

			require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
			require.Eventually(t, func() bool {
				_, err := try(s, u, http.MethodGet, "/v1/balances", "")
				return err != nil
			}, patience, 20*time.Millisecond, "new connections are refused while draining")
			select {
			case <-s.exited:
				t.Fatal("paymentsd exited with a request in flight")
			default:
			}

			release()
			first := <-firstc
			require.Equal(t, http.StatusCreated, first.status, "the in-flight request finished: %s", first)
			select {
			case <-s.exited:
			case <-time.After(patience):
				t.Fatal("paymentsd did not exit after draining")
			}
			require.NoError(t, s.err, "exit status 0:\n%s", s.stderr.String())
			require.Contains(t, s.stderr.String(), "msg=stopped")

			// It really moved, and its key completed: a restarted server
			// replays it.
			s2 := startServer(t, s.db)
			u.s = s2
			again := u.post(t, "/v1/deposits", key, body)
			require.True(t, again.replayed(), "%s", again)
			require.Equal(t, string(first.body), string(again.body))
			require.Equal(t, map[string]int64{"USD": 1250}, u.balances(t))
		})
	}
}

// storeOps is how many store operations op (idem.OpBegin, …) the server's
// middleware has run, from its metrics.
func storeOps(t *testing.T, s *server, op string) int {
	t.Helper()
	n := 0
	prefix := `idem_store_operation_duration_seconds_count{op="` + op + `"`
	for line := range strings.Lines(scrape(t, s)) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			_, count, _ := strings.Cut(rest, "} ")
			c, err := strconv.Atoi(strings.TrimSpace(count))
			require.NoError(t, err, line)
			n += c
		}
	}
	return n
}

// lockSQLite takes the database's write lock from a connection of the
// test's own, and returns the function that releases it.
func lockSQLite(t *testing.T, s *server) (release func()) {
	t.Helper()
	ctx := context.Background()
	c, err := s.sqlite(t).Conn(ctx)
	require.NoError(t, err)
	_, err = c.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)
	done := false
	release = func() {
		if !done {
			done = true
			_, err := c.ExecContext(ctx, "ROLLBACK")
			if err != nil && !strings.Contains(err.Error(), "no transaction") {
				t.Errorf("release the write lock: %v", err)
			}
			_ = c.Close()
		}
	}
	t.Cleanup(release)
	return release
}
