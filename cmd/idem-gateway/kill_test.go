package main_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/cmd/internal/chaos"
	"github.com/idem-dev/idem/internal/require"
)

// TestReplicasKilled runs three gateway replicas on one PostgreSQL key
// store behind the chaos harness's front proxy, which sends a request
// whose replica breaks the connection to another, while clients pay
// through it with retrying Go clients and replicas are SIGKILLed and
// started again. The Python upstream records every request it runs.
//
// Deduplicating upstream (--upstream-dedups): every payment ends 201 and
// runs at most once there, however often a retry reaches it. Upstream
// that does not deduplicate: no payment runs twice there; a payment whose
// gateway died with it in flight ends in the stored outcome-unknown
// answer instead.
func TestReplicasKilled(t *testing.T) {
	t.Parallel()
	for _, dedups := range []bool{true, false} {
		t.Run(fmt.Sprintf("UpstreamDedups=%v", dedups), func(t *testing.T) {
			t.Parallel()
			killReplicas(t, dedups)
		})
	}
}

// payment is one client payment and its final answer.
type payment struct {
	key    string
	status int
	body   string
}

func killReplicas(t *testing.T, dedups bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var upArgs []string
	args := []string{"--listen", "127.0.0.1:0", "--db", pgDB(t),
		"--lease-duration", "1s", "--upstream-timeout", "10s"}
	if dedups {
		upArgs = []string{"--dedup"}
		args = append(args, "--upstream-dedups")
	}
	up := startUpstream(t, upArgs...)
	args = append(args, "--upstream", up.url)

	replicas := make([]*chaos.Replica, 3)
	logDir := t.TempDir()
	for i := range replicas {
		replicas[i] = chaos.NewReplica(i, binary, logDir, args)
		require.NoError(t, replicas[i].StartRetrying(ctx, time.Minute)) // one at a time: each migrates
		t.Cleanup(func() { replicas[i].Kill() })
	}
	var stats chaos.Stats
	balancer := chaos.NewBalancer(replicas, 10*time.Second, len(replicas), &stats)
	front := httptest.NewServer(balancer)
	t.Cleanup(front.Close)
	t.Cleanup(balancer.Close)

	// cut counts the answers "in flight" from a replica while the attempt
	// that held the key was killed mid-request.
	var cut atomic.Int64
	hc := &http.Client{Transport: &client.Transport{
		MaxAttempts: 100, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, AttemptTimeout: 20 * time.Second,
		AttemptFunc: func(a client.Attempt) {
			if a.Status == http.StatusConflict && a.Header.Get("Retry-After") != "" {
				cut.Add(1)
			}
		},
	}}
	pay := func(key string) (payment, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/pay/"+key, strings.NewReader(`{"amount":100}`))
		if err != nil {
			return payment{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", key)
		resp, err := hc.Do(req)
		if err != nil {
			return payment{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return payment{key: key, status: resp.StatusCode, body: string(b)}, err
	}

	// The clients pay until the killer stops them.
	var (
		stop     atomic.Bool
		mu       sync.Mutex // guards payments
		payments []payment
		clients  sync.WaitGroup
	)
	for c := range 8 {
		clients.Go(func() {
			for n := 0; !stop.Load(); n++ {
				p, err := pay(fmt.Sprintf("c%d-%d", c, n))
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				payments = append(payments, p)
				mu.Unlock()
			}
		})
	}

	// The killer: a SIGKILL every 100 to 500 ms, the replica started again
	// at once, until at least 8 kills have cut 5 requests off mid-flight.
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	for ; kills < 8 || cut.Load() < 5; kills++ {
		require.True(t, time.Now().Before(deadline), "after %d kills, only %d requests cut off", kills, cut.Load())
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		rep := replicas[rand.IntN(len(replicas))]
		rep.Kill()
		require.NoError(t, rep.StartRetrying(ctx, time.Minute))
	}
	stop.Store(true)
	clients.Wait()

	// What the upstream ran, per payment.
	ran := map[string]int{}
	for _, e := range up.log(t) {
		if e.Ran {
			ran[strings.TrimPrefix(e.Path, "/pay/")]++
		}
	}
	var answered, unknowns int
	for _, p := range payments {
		switch {
		case p.status == http.StatusCreated:
			answered++
			require.Equal(t, 1, ran[p.key], "payment %s: answered 201, run once upstream", p.key)
		case !dedups && p.status == http.StatusConflict && strings.Contains(p.body, "#outcome-unknown"):
			unknowns++
			require.LessOrEqual(t, ran[p.key], 1, "payment %s: outcome unknown, run at most once upstream", p.key)
		default:
			t.Fatalf("payment %s: final answer %d %s", p.key, p.status, p.body)
		}
		// Asked again after the faults, it gets the same answer.
		again, err := pay(p.key)
		require.NoError(t, err)
		require.Equal(t, p, again, "payment %s asked again", p.key)
	}
	for key, n := range ran {
		require.Equal(t, 1, n, "payment %s ran %d times upstream", key, n)
	}
	t.Logf("%d kills, %d requests cut off, %d payments: %d answered 201, %d outcome-unknown; front proxy retries %d; upstream ran %d",
		kills, cut.Load(), len(payments), answered, unknowns, stats.BalancerRetries.Load(), len(ran))
}

// assertNoError reports err from a goroutine other than the test's, where
// require must not be used.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
