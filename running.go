package idem

import (
	"context"
	"sync"
	"time"
)

// running is the keys this process is executing in an atomic mode, so
// that a duplicate that arrives meanwhile waits for the first to end
// rather than running its handler beside it: in ModeAtomicDeferred the
// duplicate's run would only be rolled back, and in ModeAtomic its claim
// would hold a transaction and a connection waiting on the first's row.
// It is an optimisation, never the arbiter: every request still goes
// down the store's path, whose claim decides, and a duplicate in another
// process meets only that claim.
//
// A key being executed costs one map entry, removed when its request
// ends; a waiter costs a channel, shared by all the waiters of a key,
// and a timer while it waits. No goroutine is started.
type running struct {
	mu   sync.Mutex
	keys map[scopedKey]*runEnd // nil until a duplicate waits for the key
}

type scopedKey struct{ scope, key string }

// runEnd is how the execution of a key ended, for the duplicates that
// wait for it: done is closed then, after then is set to what each of
// them returns (answered, waitedOut), or to entered: nothing answers for
// the key (a retriable failure, a panic, a client gone), and one of them
// executes it in the first's place.
type runEnd struct {
	done chan struct{}
	then entry
}

// entry says what enter did: the request executes the key (entered),
// the first's execution answered it (answered), the first still runs
// after the longest wait allowed or was itself told the key is in
// flight (waitedOut), or the request's context ended (givenUp).
type entry int

const (
	entered entry = iota
	answered
	waitedOut
	givenUp
)

func newRunning() *running { return &running{keys: map[scopedKey]*runEnd{}} }

// enter registers k as executing, or, while another request executes it,
// waits for that one to end, for at most wait and while ctx lasts. When
// the first ended without an answer for the key (a retriable failure, a
// panic, a client gone), one of its waiters enters in its place and the
// others wait for that one, within the same bound.
func (r *running) enter(ctx context.Context, k scopedKey, wait time.Duration) entry {
	var timer *time.Timer
	for {
		r.mu.Lock()
		end, busy := r.keys[k]
		if !busy {
			r.keys[k] = nil
			r.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return entered
		}
		if end == nil {
			end = &runEnd{done: make(chan struct{})}
			r.keys[k] = end
		}
		r.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		select {
		case <-end.done:
			if end.then != entered {
				timer.Stop()
				return end.then
			}
		case <-timer.C:
			return waitedOut
		case <-ctx.Done():
			timer.Stop()
			return givenUp
		}
	}
}

// leave ends the execution of k that enter registered, waking its
// waiters.
func (r *running) leave(k scopedKey, then entry) {
	r.mu.Lock()
	end := r.keys[k]
	delete(r.keys, k)
	r.mu.Unlock()
	if end != nil {
		end.then = then
		close(end.done)
	}
}

// forWaiters is what a request's result tells the duplicates waiting for
// it: it executed, or was answered from the record itself (the record
// answers them); it was told the key is in flight (so are they); else
// one of them executes the key.
func (res result) forWaiters() entry {
	switch res.outcome {
	case OutcomeExecuted, OutcomeReplayed, OutcomeKeyReused:
		return answered
	case OutcomeInFlight:
		return waitedOut
	}
	return entered
}
