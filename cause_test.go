package idem_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
)

// TestUnknownCause classifies the failures of real HTTP calls.
func TestUnknownCause(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				if bytes.HasPrefix(buf[:n], []byte("GET /hang")) {
					<-hold
				}
			}()
		}
	}()
	call := func(path string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+path, http.NoBody)
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		require.Error(t, err)
		return err
	}
	require.Equal(t, idem.CauseTimeout, idem.UnknownCause(call("/hang", 100*time.Millisecond)), "no answer before the deadline")
	require.Equal(t, idem.CauseReset, idem.UnknownCause(call("/close", time.Minute)), "the connection closed before an answer")
	require.Equal(t, idem.CauseNoAnswer, idem.UnknownCause(errors.New("tls: handshake failure")), "any other failure")
}
