package main_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
	"github.com/idem-dev/idem/internal/require"
)

// TestGRPCLargeMessages sends 64 CreateDeposit calls of 4 MB (under
// grpc-go's default limit of 4 MiB) at once from
// one user: each is refused (ResourceExhausted: past the message limit,
// the HTTP body limit), nothing is stored, and another user's deposit is
// answered meanwhile.
func TestGRPCLargeMessages(t *testing.T) {
	t.Parallel()
	// The message bound alone refuses them: on a busy machine a stream's
	// first bytes may come later than the default --body-timeout, which
	// would refuse it DeadlineExceeded instead (docs/grpc.md).
	s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0", "--body-timeout", "10m")
	hostile, honest := grpcDial(t, s, s.newUser(t)), grpcDial(t, s, s.newUser(t))
	big := &paymentsv1.CreateDepositRequest{Currency: strings.Repeat("U", 4_000_000), Amount: 1}
	var wg sync.WaitGroup
	codesSeen := make(chan codes.Code, 64)
	for range 64 {
		wg.Go(func() {
			_, err := hostile.client.CreateDeposit(hostile.call(newKey()), big)
			codesSeen <- status.Code(err)
		})
	}
	_, err := honest.client.CreateDeposit(honest.call(newKey()), &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: 100})
	require.NoError(t, err, "the honest user is answered")
	wg.Wait()
	close(codesSeen)
	for c := range codesSeen {
		require.Equal(t, codes.ResourceExhausted, c)
	}
	require.Zero(t, hostile.storedKeys(t), "nothing stored")
	proc, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(proc)) {
		if strings.HasPrefix(line, "VmHWM:") {
			t.Logf("paymentsd's peak resident memory: %s", strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
		}
	}
}

// TestGRPCRequestsPerUser holds a user's balance so that their deposits
// wait in flight: past --requests-per-scope, their calls are refused with
// ResourceExhausted too-many-requests and a RetryInfo, nothing stored,
// while another user's deposit is answered.
func TestGRPCRequestsPerUser(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "postgres"), "--grpc-addr", "127.0.0.1:0", "--requests-per-scope", "4")
	u, other := grpcDial(t, s, s.newUser(t)), grpcDial(t, s, s.newUser(t))
	req := func(n int64) *paymentsv1.CreateDepositRequest {
		return &paymentsv1.CreateDepositRequest{Currency: "USD", Amount: n}
	}
	_, err := u.client.CreateDeposit(u.call(newKey()), req(1))
	require.NoError(t, err)
	stored := u.storedKeys(t)

	release := lockBalances(t, s, u.user)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, err := u.client.CreateDeposit(u.call(newKey()), req(int64(10+i)))
			require.NoError(t, err)
		})
	}
	waitForLockWait(t, s, 4)
	for i := range 8 {
		ctx, cancel := context.WithTimeout(u.call(newKey()), patience)
		_, err := u.client.CreateDeposit(ctx, req(int64(100+i)))
		cancel()
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		require.Equal(t, "too-many-requests", grpcReason(t, err)["reason"])
		require.Equal(t, "1", grpcReason(t, err)["retryAfter"])
		var retry *errdetails.RetryInfo
		for _, d := range status.Convert(err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri
			}
		}
		require.NotNil(t, retry, "%v", err)
		require.Equal(t, time.Second, retry.GetRetryDelay().AsDuration())
	}
	_, err = other.client.CreateDeposit(other.call(newKey()), req(5))
	require.NoError(t, err, "another user is answered")
	require.Equal(t, stored, u.storedKeys(t), "nothing stored for the refused calls")
	release()
	wg.Wait()
	require.Equal(t, map[string]int64{"USD": 1 + 10 + 11 + 12 + 13}, u.balances(t))
}

// TestGRPCPrefaceOnly opens a connection that sends the HTTP/2 preface and
// nothing more: it is closed after the idle timeout, as an idle HTTP
// connection is.
func TestGRPCPrefaceOnly(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"), "--grpc-addr", "127.0.0.1:0", "--idle-timeout", "1s")
	m := grpcListening.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m)
	conn, err := net.Dial("tcp", m[1])
	require.NoError(t, err)
	defer conn.Close()
	// The client preface, then an empty SETTINGS frame.
	_, err = conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(patience)))
	_, err = io.Copy(io.Discard, conn)
	require.NoError(t, err, "closed by the server, not by the test's deadline")
}
