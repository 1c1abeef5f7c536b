package main_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// Each fault at probability 1; the retry goes to the same bank restarted
// without faults, as a client's retry reaches a link that recovered.

func TestErrorBeforeExecutesNothing(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t), "--faults", "error-before=1")
	r := b.post(t, "k", body(100, "acct"))
	require.Equal(t, http.StatusInternalServerError, r.status, "%s", r)
	require.Equal(t, "internal", r.problemType(t))
	require.Empty(t, b.byKey(t, "k"))

	b = b.restart(t)
	retry := b.post(t, "k", body(100, "acct"))
	require.Equal(t, http.StatusCreated, retry.status, "%s", retry)
	require.False(t, retry.replayed(), "the retry is the first execution")
}

func TestErrorAfterExecutes(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t), "--faults", "error-after=1")
	r := b.post(t, "k", body(100, "acct"))
	require.Equal(t, http.StatusInternalServerError, r.status, "%s", r)
	require.Len(t, b.byKey(t, "k"), 1, "executed despite the 500")

	requireRetryReplays(t, b.restart(t), "k", body(100, "acct"))
}

func TestSlowAfterExecutesAndAnswersLate(t *testing.T) {
	t.Parallel()
	t.Run("ClientGivesUp", func(t *testing.T) {
		t.Parallel()
		b := startBank(t, newDB(t), "--faults", "slow-after=1") // the default delay, 60s
		ctx, giveUp := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := b.send(ctx, client, "k", body(100, "acct"))
			done <- err
		}()
		waitFor(t, b, func() (struct{}, bool) { return struct{}{}, len(b.byKey(t, "k")) == 1 }, "the transfer")
		select {
		case err := <-done:
			t.Fatalf("the slow answer came before the delay: %v", err)
		default:
		}
		giveUp() // the client's timeout
		require.ErrorIs(t, <-done, context.Canceled)

		requireRetryReplays(t, b.restart(t), "k", body(100, "acct"))
	})
	t.Run("PatientClientGetsTheAnswer", func(t *testing.T) {
		t.Parallel()
		b := startBank(t, newDB(t), "--faults", "slow-after=1", "--slow-delay", "20ms")
		r := b.post(t, "k", body(100, "acct"))
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
		require.Len(t, b.byKey(t, "k"), 1)
	})
	t.Run("ShutdownAnswersAtOnce", func(t *testing.T) {
		t.Parallel()
		b := startBank(t, newDB(t), "--faults", "slow-after=1")
		done := make(chan reply, 1)
		go func() { done <- b.post(t, "k", body(100, "acct")) }()
		waitFor(t, b, func() (struct{}, bool) { return struct{}{}, len(b.byKey(t, "k")) == 1 }, "the transfer")
		b.stop(t) // would wait 60s if the slow answer held the drain
		r := <-done
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
	})
}

func TestResetAfterExecutes(t *testing.T) {
	t.Parallel()
	b := startBank(t, newDB(t), "--faults", "reset-after=1")
	// A connection of its own: on a reused one, net/http would resend a
	// request carrying an Idempotency-Key by itself.
	c := &http.Client{Timeout: stateTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	_, err := b.send(t.Context(), c, "k", body(100, "acct"))
	require.ErrorIs(t, err, syscall.ECONNRESET)
	require.Len(t, b.byKey(t, "k"), 1, "executed before the reset")

	requireRetryReplays(t, b.restart(t), "k", body(100, "acct"))
}

func TestHangNeverAnswers(t *testing.T) {
	t.Parallel()
	t.Run("UntilTheClientLeaves", func(t *testing.T) {
		t.Parallel()
		b := startBank(t, newDB(t), "--faults", "hang=1")
		ctx, giveUp := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := b.send(ctx, client, "k", body(100, "acct"))
			done <- err
		}()
		waitHeld(t, b)
		giveUp() // the client's timeout
		require.ErrorIs(t, <-done, context.Canceled)
		require.Empty(t, b.byKey(t, "k"), "a hung request executes nothing")

		b = b.restart(t)
		retry := b.post(t, "k", body(100, "acct"))
		require.Equal(t, http.StatusCreated, retry.status, "%s", retry)
		require.False(t, retry.replayed(), "the retry is the first execution")
	})
	t.Run("UntilTheServerStops", func(t *testing.T) {
		t.Parallel()
		b := startBank(t, newDB(t), "--faults", "hang=1")
		done := make(chan error, 1)
		go func() {
			_, err := b.send(t.Context(), client, "k", body(100, "acct"))
			done <- err
		}()
		waitHeld(t, b)
		b.stop(t) // the drain does not wait for the held request
		err := <-done
		require.Error(t, err, "the connection closes without an answer")
		require.False(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	})
}

// waitHeld waits until bankd logs that it holds a request.
func waitHeld(t *testing.T, b *bank) {
	t.Helper()
	waitFor(t, b, func() (struct{}, bool) {
		return struct{}{}, strings.Contains(b.stderr.String(), "fault=hang")
	}, "the hang fault's log line")
}

// requireRetryReplays requires that a retry of key gets the transfer that
// an earlier, faulted request executed.
func requireRetryReplays(t *testing.T, b *bank, key, reqBody string) {
	t.Helper()
	executed := b.byKey(t, key)
	require.Len(t, executed, 1)
	retry := b.post(t, key, reqBody)
	require.Equal(t, http.StatusCreated, retry.status, "%s", retry)
	require.True(t, retry.replayed())
	require.Equal(t, executed[0], retry.transfer(t))
	require.Equal(t, string(b.get(t, "/v1/transfers/"+executed[0].ID).body), string(retry.body))
	require.Len(t, b.list(t, "/v1/transfers"), 1)
}

// The same seed and the same sequence of requests give the same faults.
func TestSeedReproducesFaults(t *testing.T) {
	t.Parallel()
	codes := func() []int {
		b := startBank(t, newDB(t), "--faults", "error-before=0.5", "--seed", "42")
		var out []int
		for i := range 24 {
			out = append(out, b.post(t, "k"+string(rune('a'+i)), body(100, "acct")).status)
		}
		return out
	}
	first := codes()
	require.Contains(t, first, http.StatusCreated)
	require.Contains(t, first, http.StatusInternalServerError)
	require.Equal(t, first, codes())
}
