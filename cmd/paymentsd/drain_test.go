package main_test

import (
	"context"
	"net/http"
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
			s := startServer(t, newDB(t, store))
			u := s.newUser(t)
			u.deposit(t, "USD", 1000)

			// Hold the request inside the server: a balance row lock on
			// PostgreSQL, the database's write lock on SQLite.
			var release func()
			if store == "postgres" {
				release = lockBalances(t, s, u)
			} else {
				release = lockSQLite(t, s)
			}
			key := newKey()
			body := `{"currency":"USD","amount":250}`
			firstc := sendAsync(s, u, "/v1/deposits", body, key)
			if store == "postgres" {
				waitForLockWait(t, s, 1)
			} else {
				time.Sleep(300 * time.Millisecond) // the request waits for the write lock
			}

			require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
			require.Eventually(t, func() bool {
				_, err := try(s, u, http.MethodGet, "/v1/balances", "")
				return err != nil
			}, 5*time.Second, 20*time.Millisecond, "new connections are refused while draining")
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
			case <-time.After(15 * time.Second):
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
