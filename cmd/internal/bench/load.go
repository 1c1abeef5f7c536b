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
	"google.golang.org/grpc/codes"

	"github.com/idem-dev/idem/client"
)

// kind is what a variant does.
type kind int

const (
	kindFresh   kind = iota // a new key every request
	kindReplay              // a key already completed, picked at random
	kindStorm               // each key sent by StormClients clients at once
	kindBare                // fresh requests to the handlers without idempotency
	kindCeiling             // the SQL of a fresh atomic-deferred request, through pgx, no HTTP
)

// op is what a request asks for.
type op int

const (
	opTransaction op = iota // POST /v1/transactions, a conversion
	opDeposit               // POST /v1/deposits
	opPayout                // POST /v1/payouts, through the bank
	opTrivial               // POST /v1/things to the trivial handler (trivial.go)
)

// door is how a variant's requests reach the server.
type door int

const (
	doorHTTP  door = iota // keep-alive HTTP/1.1
	doorGRPC              // payments.v1.Payments over one HTTP/2 connection
	doorQueue             // commands through NATS JetStream, answered on a reply subject
)

// variant is one line of the report.
type variant struct {
	name   string
	kind   kind
	op     op
	door   door
	mode   string        // an idem.Mode name, for fresh, replay and storm
	srv    *server       // nil for the ceiling
	peer   *server       // the bank or the broker the server works with; its CPU is counted
	db     *database     // where its data lives
	pool   *pgxpool.Pool // the ceiling's own connections
	replay func(r *rand.Rand) request
	citus  *cluster // the Citus cluster db is on, whose workers are read; nil for one PostgreSQL
	// checked: every key sent is counted in the ledger (and at the bank)
	// after each segment (effects.go).
	checked bool
}

// request is one request of op, scoped by the user's API key (by a header
// for the trivial handler).
type request struct {
	op     op
	user   *user
	key    string
	amount int64 // of its own: no two requests of a run share one
	body   []byte
}

// workload makes requests that never trip the minute nets: each has an
// amount of its own.
type workload struct {
	run    string
	amount atomic.Int64
}

func transferBody(amount int64) []byte {
	return []byte(`{"source_currency":"USD","target_currency":"EUR","amount":` + strconv.FormatInt(amount, 10) + `}`)
}

// fresh returns a fresh request of the op v sends, for a random user of
// its database.
func (w *workload) fresh(r *rand.Rand, v *variant) request {
	n := w.amount.Add(1)
	rq := request{op: v.op, user: &v.db.users[r.IntN(len(v.db.users))], key: w.run + "-" + strconv.FormatInt(n, 10), amount: 10_000 + n}
	a := strconv.FormatInt(rq.amount, 10)
	switch v.op {
	case opDeposit:
		rq.body = []byte(`{"currency":"USD","amount":` + a + `}`)
	case opPayout:
		rq.body = []byte(`{"currency":"USD","amount":` + a + `,"destination":"acct-bench"}`)
	case opTrivial:
		rq.body = []byte(`{"amount":` + a + `,"note":"bench"}`)
	default:
		rq.body = transferBody(rq.amount)
	}
	return rq
}

var opPaths = map[op]string{opTransaction: "/v1/transactions", opDeposit: "/v1/deposits", opPayout: "/v1/payouts", opTrivial: "/v1/things"}

// outcome is one answer as the report counts it.
type outcome struct {
	status   int    // HTTP's, or the one a gRPC code stands for
	code     string // a gRPC answer's code, which labels it
	replayed bool
	body     []byte
	err      error
}

func (o outcome) label() string {
	l := strconv.Itoa(o.status)
	if o.code != "" {
		l = o.code
	}
	switch {
	case o.err != nil:
		return "transport error"
	case o.replayed:
		return l + " replayed"
	}
	return l
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

// sender sends requests through a variant's door.
type sender interface {
	send(ctx context.Context, rq request) outcome
	close()
}

// newSender opens v's door for conc clients. A seeding sender's HTTP
// requests retry with their keys.
func newSender(v *variant, conc int, seeding bool) (sender, error) {
	switch v.door {
	case doorGRPC:
		return newGRPCSender(v.srv)
	case doorQueue:
		return newQueueSender(v.peer)
	}
	c := newHTTPClient(conc)
	if seeding {
		// Seeding is set-up, not measurement: its requests retry with
		// their keys, so that a passing failure does not end the run. The
		// measured requests never retry: a retry would hide the answer the
		// table counts.
		c.Transport = &client.Transport{Base: c.Transport}
	}
	return httpSender{c: c, base: v.srv.base}, nil
}

type httpSender struct {
	c    *http.Client
	base string
}

func (s httpSender) send(ctx context.Context, rq request) outcome {
	return send(ctx, s.c, s.base, rq, false)
}
func (s httpSender) close() { s.c.CloseIdleConnections() }

func send(ctx context.Context, c *http.Client, base string, rq request, keepBody bool) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+opPaths[rq.op], bytes.NewReader(rq.body))
	if err != nil {
		return outcome{err: err}
	}
	if rq.op == opTrivial {
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
	bad      int       // measured answers that are not what the variant expects
	total    int       // all requests, warm-up included
	sent     []sentKey // a storm's or a checked variant's requests, warm-up included
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
		m.sent = append(m.sent, t.sent...)
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

// succeeded: the answer a request of v's door gets when it takes effect
// (or replays one): 201, or OK over gRPC.
func (v *variant) succeeded(o outcome) bool {
	if v.door == doorGRPC {
		return o.err == nil && o.code == codes.OK.String()
	}
	return o.err == nil && o.status == http.StatusCreated
}

// runRequests measures fresh, replay and bare through v's door:
// closed-loop clients, each request answered before the client sends its
// next. A checked variant's requests are kept in the tally, for
// verifyEffects.
func runRequests(ctx context.Context, v *variant, wl *workload, conc int, w window) (*tally, error) {
	snd, err := newSender(v, conc, false)
	if err != nil {
		return nil, err
	}
	defer snd.close()
	return closedLoop(ctx, conc, w, func(r *rand.Rand, t *tally) error {
		var rq request
		if v.kind == kindReplay {
			rq = v.replay(r)
		} else {
			rq = wl.fresh(r, v)
		}
		t0 := time.Now()
		o := snd.send(ctx, rq)
		t1 := time.Now()
		t.add(w, t0, t1, o, v.succeeded(o) && o.replayed == (v.kind == kindReplay))
		if v.checked {
			t.sent = append(t.sent, sentKey{rq: rq, outcomes: []outcome{o}})
		}
		return nil
	})
}

// seed completes n keys through v's server and door, with conc clients,
// and returns them: fresh requests of the op v sends.
func seed(ctx context.Context, v *variant, wl *workload, n, conc int) ([]request, error) {
	snd, err := newSender(v, conc, true)
	if err != nil {
		return nil, err
	}
	defer snd.close()
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
				if o := snd.send(ctx, rq); !v.succeeded(o) || o.replayed {
					errs[i] = fmt.Errorf("seed request: %s, %v", o.label(), o.err)
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
