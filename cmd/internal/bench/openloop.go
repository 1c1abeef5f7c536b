package bench

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// openLoopConns bounds the open-loop generator's connections: far more
// than the load keeps busy (a few at 400 requests a second), so that in a
// stall the requests queue in paymentsd, as a real client's would, rather
// than in the generator's connection pool.
const openLoopConns = 64

// answer is one request of an open-loop run.
type answer struct {
	window int // the window it fell due in (phaseClock.kinds)
	replay bool
	lat    time.Duration // from when the request was due to its answer's last byte
	label  string        // outcome.label()
	ok     bool          // 201, replayed exactly when a replay
}

// openLoop sends POST /v1/transactions at a fixed rate, alternately a
// fresh request with a new key and a replay of a live preloaded key, each
// on a goroutine of its own when it falls due, whatever the answers before
// it: a slow answer never delays the next request (no coordinated
// omission), and a latency counts from when its request was due, so that
// the generator's own lateness is measured too.
type openLoop struct {
	rate   int
	srv    *server
	db     *database
	wl     *workload
	lo, hi int          // replays pick among preloaded records lo to hi-1
	window atomic.Int32 // the window of the requests falling due now

	mu  sync.Mutex
	got []answer
}

// run sends requests until stop is closed or ctx is done, waits for the
// answers of those in flight and returns every answer.
func (l *openLoop) run(ctx context.Context, stop <-chan struct{}) []answer {
	c := newHTTPClient(openLoopConns)
	defer c.CloseIdleConnections()
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	interval := time.Second / time.Duration(l.rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		select {
		case <-stop:
		case <-ctx.Done():
		default:
			l.launch(ctx, c, &wg, rnd, i, due)
			continue
		}
		wg.Wait()
		return l.got
	}
}

// launch sends request i, due at due, on a goroutine of its own: odd
// requests replay a live preloaded key, even ones are fresh.
func (l *openLoop) launch(ctx context.Context, c *http.Client, wg *sync.WaitGroup, rnd *rand.Rand, i int, due time.Time) {
	replay := i%2 == 1
	var rq request
	if replay {
		rq = preloadedRequest(l.db, l.lo+rnd.IntN(l.hi-l.lo))
	} else {
		rq = l.wl.fresh(rnd, &variant{db: l.db})
	}
	w := int(l.window.Load())
	wg.Go(func() {
		o := send(ctx, c, l.srv.base, rq, false)
		a := answer{window: w, replay: replay, lat: time.Since(due), label: o.label(),
			ok: o.err == nil && o.status == http.StatusCreated && o.replayed == replay}
		l.mu.Lock()
		l.got = append(l.got, a)
		l.mu.Unlock()
	})
}
