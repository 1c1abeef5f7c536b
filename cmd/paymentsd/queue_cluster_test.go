package main_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/cmd/internal/chaos"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/internal/require"
)

// TestQueueCluster runs the queue door on a JetStream cluster of three
// nats-server processes with --nats-replicas 3, and SIGKILLs the leader of
// PAYMENTS while commands, and copies of them, are published: every
// command is answered 201, and each key moves its money once.
func TestQueueCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := chaos.StartBroker(ctx, buildBinary(t, "nats-server", "github.com/nats-io/nats-server/v2"), t.TempDir(), 3)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	s := startServer(t, newDB(t, "postgres"), "--nats-url", b.URL(), "--nats-replicas", "3")
	u := s.newUser(t)

	nc, err := nats.Connect(b.URL(), nats.Timeout(patience), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	// The answers are kept in a stream of three replicas too: a test
	// connection to the killed node would miss what a subscription got.
	answers, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST_ANSWERS", Subjects: []string{"payments.results.test.>"}, Replicas: 3})
	require.NoError(t, err)
	stream, err := js.Stream(ctx, "PAYMENTS")
	require.NoError(t, err)
	info := stream.CachedInfo()
	require.Equal(t, 3, info.Config.Replicas, "--nats-replicas makes PAYMENTS")
	require.True(t, info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2, "PAYMENTS has a leader and two replicas: %+v", info.Cluster)

	const keys = 30
	amount := func(i int) int64 { return int64(100 + i) }
	publish := func(i int) {
		t.Helper()
		msg := &nats.Msg{Subject: "payments.commands.deposits", Data: fmt.Appendf(nil, `{"currency":"USD","amount":%d}`, amount(i)),
			Header: nats.Header{"Idempotency-Key": {fmt.Sprintf("cluster-%d", i)}, "Authorization": {"Bearer " + u.apiKey},
				"Reply-To": {fmt.Sprintf("payments.results.test.%d", i)}}}
		// Sent again until acknowledged: while PAYMENTS elects a leader,
		// a publish gets no answer, or a stale one, and may yet be stored.
		waitFor(t, func() bool {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := js.PublishMsg(pctx, msg)
			return err == nil
		}, "command %d acknowledged", i)
	}
	for i := range keys / 3 {
		publish(i)
	}
	leader := info.Cluster.Leader
	require.NoError(t, b.Kill(leader))
	waitFor(t, func() bool {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		i, err := stream.Info(lctx)
		return err == nil && i.Cluster != nil && i.Cluster.Leader != "" && i.Cluster.Leader != leader
	}, "another node leads PAYMENTS once %s is killed", leader)
	for i := range 2 * keys / 3 { // the first third again, and a third of new keys
		publish(i)
	}
	require.NoError(t, b.Restart(ctx, leader))
	for i := range keys {
		publish(i)
	}

	var want int64
	for i := range keys {
		want += amount(i)
		waitFor(t, func() bool {
			m, err := answers.GetLastMsgForSubject(ctx, fmt.Sprintf("payments.results.test.%d", i))
			return err == nil && m.Header.Get(consumer.HeaderStatus) == "201"
		}, "command %d answered 201", i)
	}
	waitFor(t, func() bool {
		i, err := stream.Info(ctx)
		return err == nil && i.State.Msgs == 0
	}, "every command settled")
	require.Equal(t, map[string]int64{"USD": want}, u.balances(t), "each key moved its money once")
}
