package main

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestGRPCDetachKeepsClientDeadline: past the tap's message deadline, the
// handler runs on, and sees the client's deadline as its context's.
func TestGRPCDetachKeepsClientDeadline(t *testing.T) {
	t.Parallel()
	deadline := time.Now().Add(time.Hour)
	stream, cancel := context.WithDeadline(context.Background(), deadline) // grpc-timeout's
	defer cancel()
	message, cancelMessage := context.WithTimeout(stream, time.Nanosecond) // grpcTap's
	defer cancelMessage()
	<-message.Done()
	_, err := grpcDetach(context.WithValue(message, streamKey{}, stream), nil, nil, func(ctx context.Context, _ any) (any, error) {
		d, ok := ctx.Deadline()
		require.True(t, ok, "the handler sees the client's deadline")
		require.Equal(t, deadline, d)
		return nil, ctx.Err()
	})
	require.NoError(t, err, "the message deadline does not end the handler")
}
