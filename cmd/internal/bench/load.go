package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/client"
)

// kind is what a variant does.
type kind int

const (
	kindFresh   kind = iota // a new key every request
	kindReplay              // a key already completed, picked at random
	kindStorm               // each key sent by StormClients clients at once
	kindBare                // fresh requests to the handlers without idempotency
	kindCeiling             // the SQL of a fresh atomic request, through pgx, no HTTP
)

// variant is one line of the report.
type variant struct {
	name   string
	kind   kind
	mode   string        // atomic or leased, for fresh, replay and storm
	srv    *server       // nil for the ceiling
	db     *database     // where its data lives
	pool   *pgxpool.Pool // the ceiling's own connections
	replay func(r *rand.Rand) request
	// trivial: the requests go to the trivial handler (trivial.go), not
	// to the payments API.
	trivial bool
}

// request is one POST /v1/transactions, or POST /v1/things to the
// trivial handler, scoped by a header instead of an API key.
type request struct {
	user    *user
	key     string
	body    []byte
	trivial bool
}

// workload makes requests that never trip the minute net: each has an
// amount of its own.
type workload struct {
	run    string
	amount atomic.Int64
}

func transferBody(amount int64) []byte {
	return []byte(`{"source_currency":"USD","target_currency":"EUR","amount":` + strconv.FormatInt(amount, 10) + `}`)
}

// next returns a fresh request of a random user of db.
func (w *workload) next(r *rand.Rand, db *database) (request, int64) {
	n := w.amount.Add(1)
	amount := 10_000 + n
	return request{user: &db.users[r.IntN(len(db.users))], key: w.run + "-" + strconv.FormatInt(n, 10), body: transferBody(amount)}, amount
}

// nextTrivial returns a fresh request to the trivial handler.
func (w *workload) nextTrivial(r *rand.Rand, db *database) request {
	n := w.amount.Add(1)
	body := []byte(`{"amount":` + strconv.FormatInt(10_000+n, 10) + `,"note":"bench"}`)
	return request{user: &db.users[r.IntN(len(db.users))], key: w.run + "-" + strconv.FormatInt(n, 10), body: body, trivial: true}
}

// fresh returns a fresh request of the kind v sends.
func (w *workload) fresh(r *rand.Rand, v *variant) request {
	if v.trivial {
		return w.nextTrivial(r, v.db)
	}
	rq, _ := w.next(r, v.db)
	return rq
}

// outcome is one answer as the report counts it.
type outcome struct {
	status   int
	replayed bool
	body     []byte
	err      error
}

func (o outcome) label() string {
	switch {
	case o.err != nil:
		return "transport error"
	case o.replayed:
		return strconv.Itoa(o.status) + " replayed"
	}
	return strconv.Itoa(o.status)
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
			IdleConnTimeout: time.Minute, DisableCompression: true, ForceAttemptHTTP2: false,
		},
	}
}

func send(ctx context.Context, c *http.Client, base string, rq request, keepBody bool) outcome {
	path := "/v1/transactions"
	if rq.trivial {
		path = "/v1/things"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(rq.body))
	if err != nil {
		return outcome{err: err}
	}
	if rq.trivial {
		req.Header.Set(trivialScopeHeader, rq.user.id)
	} else {
		req.Header.Set("Authorization", "Bearer "+rq.user.apiKey)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", rq.key)
	resp, err := c.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if keepBody {
		o.body, o.err = io.ReadAll(resp.Body)
	} else {
		_, o.err = io.Copy(io.Discard, resp.Body)
	}
	return o
}

// window is the time frame of one segment: requests that start at or after
// from and end by to are measured.
type window struct{ start, from, to time.Time }

func newWindow(warmup, d time.Duration) window {
	now := time.Now()
	return window{start: now, from: now.Add(warmup), to: now.Add(warmup + d)}
}

// tally is one worker's record of a segment.
type tally struct {
	lat      []time.Duration
	outcomes map[string]int
	bad      int // measured answers that are not what the variant expects
	total    int // all requests, warm-up included
}

func newTally() *tally { return &tally{outcomes: map[string]int{}} }

func (t *tally) add(w window, t0, t1 time.Time, o outcome, ok bool) {
	t.total++
	if t0.Before(w.from) || t1.After(w.to) {
		return
	}
	t.lat = append(t.lat, t1.Sub(t0))
	t.outcomes[o.label()]++
	if !ok {
		t.bad++
	}
}

func merge(ts []*tally) *tally {
	m := newTally()
	for _, t := range ts {
		m.lat = append(m.lat, t.lat...)
		for k, v := range t.outcomes {
			m.outcomes[k] += v
		}
		m.bad += t.bad
		m.total += t.total
	}
	slices.Sort(m.lat)
	return m
}

// closedLoop runs op on n workers until the window ends.
func closedLoop(ctx context.Context, n int, w window, op func(r *rand.Rand, t *tally) error) (*tally, error) {
	ts := make([]*tally, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ts[i] = newTally()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))
			for ctx.Err() == nil && time.Now().Before(w.to) {
				if err := op(r, ts[i]); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return merge(ts), ctx.Err()
}

// runHTTP measures fresh, replay and bare: closed-loop clients, each
// request answered before the client sends its next.
func runHTTP(ctx context.Context, v *variant, wl *workload, conc int, w window) (*tally, error) {
	c := newHTTPClient(conc)
	defer c.CloseIdleConnections()
	return closedLoop(ctx, conc, w, func(r *rand.Rand, t *tally) error {
		var rq request
		if v.kind == kindReplay {
			rq = v.replay(r)
		} else {
			rq = wl.fresh(r, v)
		}
		t0 := time.Now()
		o := send(ctx, c, v.srv.base, rq, false)
		t1 := time.Now()
		ok := o.err == nil && o.status == http.StatusCreated && o.replayed == (v.kind == kindReplay)
		t.add(w, t0, t1, o, ok)
		return nil
	})
}

// seed completes n keys through srv, with conc clients, and returns them:
// fresh requests of the kind v sends; v names srv and its database.
func seed(ctx context.Context, v *variant, wl *workload, n, conc int) ([]request, error) {
	srv := v.srv
	c := newHTTPClient(conc)
	defer c.CloseIdleConnections()
	// Seeding is set-up, not measurement: its requests retry with their
	// keys, so that a passing failure does not end the run. The measured
	// requests never retry: a retry would hide the answer the table counts.
	c.Transport = &client.Transport{Base: c.Transport}
	out := make([]request, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for i := range conc {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				j := int(next.Add(1)) - 1
				if j >= n || ctx.Err() != nil {
					return
				}
				rq := wl.fresh(r, v)
				rq.key = "seed-" + rq.key
				o := send(ctx, c, srv.base, rq, false)
				if o.err != nil || o.status != http.StatusCreated {
					errs[i] = fmt.Errorf("seed request: status %d, %v", o.status, o.err)
					return
				}
				out[j] = rq
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, ctx.Err()
}
