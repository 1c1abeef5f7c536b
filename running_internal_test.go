package idem

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// waitForWaiter returns once a duplicate waits for k.
func waitForWaiter(r *running, k scopedKey) {
	for {
		r.mu.Lock()
		end := r.keys[k]
		r.mu.Unlock()
		if end != nil {
			return
		}
		runtime.Gosched()
	}
}

// enterAsync runs enter on its own goroutine and returns what it says.
func enterAsync(r *running, ctx context.Context, k scopedKey, wait time.Duration) <-chan entry {
	got := make(chan entry, 1)
	go func() { got <- r.enter(ctx, k, wait) }()
	return got
}

func TestRunningDuplicateWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	ctx, long := context.Background(), time.Minute
	r, k := newRunning(), scopedKey{"alice", "k1"}
	require.Equal(t, entered, r.enter(ctx, k, long))
	require.Equal(t, entered, r.enter(ctx, scopedKey{"bob", "k1"}, long), "keys are scoped")
	r.leave(scopedKey{"bob", "k1"}, answered)

	// The first fails retriably: its waiter executes in its place, and
	// the next duplicate waits for that one, which answers it.
	second := enterAsync(r, ctx, k, long)
	waitForWaiter(r, k)
	r.leave(k, entered)
	require.Equal(t, entered, <-second)
	third := enterAsync(r, ctx, k, long)
	waitForWaiter(r, k)
	r.leave(k, answered)
	require.Equal(t, answered, <-third)

	// The first is told another process holds the key: so is its waiter,
	// at once, not after a wait of its own at the store.
	require.Equal(t, entered, r.enter(ctx, k, long))
	fourth := enterAsync(r, ctx, k, long)
	waitForWaiter(r, k)
	r.leave(k, waitedOut)
	require.Equal(t, waitedOut, <-fourth)
	require.Empty(t, r.keys, "an ended execution leaves nothing behind")
}

func TestRunningWaitIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, k := newRunning(), scopedKey{"alice", "k1"}
	require.Equal(t, entered, r.enter(ctx, k, time.Minute))
	// Past its bound a duplicate is told the key is in flight; one whose
	// client has left gives up.
	require.Equal(t, waitedOut, r.enter(ctx, k, time.Millisecond))
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.Equal(t, givenUp, r.enter(gone, k, time.Minute))
	r.leave(k, answered)
	require.Empty(t, r.keys)
	require.Equal(t, entered, r.enter(ctx, k, time.Minute), "a key that ended may be executed again")
}
