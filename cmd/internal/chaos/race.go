package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Racer stages, again and again while the other faults run, the race that
// leases and fencing tokens exist for (DESIGN.md, "a slow request whose
// lock timed out, racing its own retry"): a deposit sent to a replica whose
// database link is slowed past the lock timeout, and the same key sent to
// another replica once the first one's lease has run out. In leased mode the
// retry takes the key over and the slow attempt must lose its completion to
// the fencing token; in atomic mode the retry waits for the slow attempt's
// transaction. Either way: one deposit, one answer.
type Racer struct {
	User  *User
	Log   func(format string, args ...any)
	Ops   []*Op
	prof  Profile
	fleet *Fleet
	links *Links
	stats *Stats
	front *Client       // the front proxy, for a final answer the race left open
	db    *pgxpool.Pool // straight to PostgreSQL, to see the slow attempt's lease run out
	rng   *rand.Rand
}

// NewRacer returns a racer for user.
func NewRacer(user *User, prof Profile, fleet *Fleet, links *Links, db *pgxpool.Pool, front string, stats *Stats, seed uint64) *Racer {
	return &Racer{User: user, prof: prof, fleet: fleet, links: links, stats: stats, db: db,
		front: NewClient(front, prof.SDK, stats), rng: rand.New(rand.NewPCG(seed, 0x7ace))}
}

// hold keeps kills and freezes off the two replicas of a race, which must
// both be up.
func (r *Racer) hold(i, j int) bool {
	if !r.fleet.Hold(i) {
		return false
	}
	if !r.fleet.Hold(j) {
		r.fleet.Release(i)
		return false
	}
	if !r.fleet.Replicas[i].Alive() || !r.fleet.Replicas[j].Alive() {
		r.release(i, j)
		return false
	}
	return true
}

func (r *Racer) release(i, j int) {
	r.fleet.Release(i)
	r.fleet.Release(j)
}

// awaitExpiry returns once op's key shows a lease that has run out (leased
// mode commits the claim, so it can be seen), or after fallback (atomic
// mode's claim is never visible before its commit).
func (r *Racer) awaitExpiry(ctx context.Context, op *Op, fallback time.Duration) {
	end := time.Now().Add(fallback)
	for time.Now().Before(end) && ctx.Err() == nil {
		var expired bool
		err := r.db.QueryRow(ctx, `SELECT status = 'PROCESSING' AND lease_expires_at <= now() FROM idempotency_keys
			WHERE scope = $1 AND idempotency_key = $2`, op.User.ID, op.Key).Scan(&expired)
		if err == nil && expired {
			time.Sleep(100 * time.Millisecond)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Recheck asks every answered race key again, like Worker.Recheck.
func (r *Racer) Recheck(ctx context.Context) {
	for _, op := range r.Ops {
		if _, ok := op.FinalAnswer(); ok && ctx.Err() == nil {
			r.stats.Rechecks.Add(1)
			r.front.Send(ctx, op)
		}
	}
}

// Close releases the racer's connections.
func (r *Racer) Close() { r.front.Close() }

// Run stages races until faults ends; their requests may run on until
// deadline. Each sends one attempt straight to the slowed replica, one to
// another, and then retries through the front proxy until it has a final
// answer.
func (r *Racer) Run(ctx, faults context.Context, deadline time.Time) {
	lt := r.prof.LeaseDuration
	for seq := 0; r.prof.RaceEvery > 0; seq++ {
		select {
		case <-faults.Done():
			return
		case <-time.After(r.prof.RaceEvery):
		}
		n := len(r.fleet.Replicas)
		slow := r.rng.IntN(n)
		other := (slow + 1 + r.rng.IntN(n-1)) % n
		if !r.hold(slow, other) {
			continue
		}
		a, b := r.fleet.Replicas[slow], r.fleet.Replicas[other]
		op := &Op{User: r.User, Key: fmt.Sprintf("race-%d", seq), Kind: OpDeposit, Path: "/v1/deposits", Scenario: "race",
			Body: fmt.Appendf(nil, `{"currency":"EUR","amount":%d}`, 100*(20_000+int64(seq))+99)}
		applied := make(chan bool, 1)
		// Each answer from PostgreSQL takes 60 % of the lock timeout: lease
		// renewals miss, and the request outlives its lease.
		latency := lt * 6 / 10
		go func() {
			ok, _ := r.links.Slow(ctx, slow, latency, 5*lt, func() { applied <- true })
			if !ok {
				applied <- false
			}
		}()
		if !<-applied {
			r.release(slow, other)
			continue
		}
		r.stats.Races.Add(1)
		r.Ops = append(r.Ops, op)
		patient := r.prof.SDK
		patient.Timeout = 8 * lt
		ca := NewClient(a.URL(), patient, r.stats)
		cb := NewClient(b.URL(), patient, r.stats)
		var wg sync.WaitGroup
		wg.Go(func() { ca.Send(ctx, op) })
		r.awaitExpiry(ctx, op, 4*lt)
		// One attempt on the other replica, which may be killed meanwhile;
		// the front proxy takes it from there.
		r.stats.Retries.Add(1)
		cb.Send(ctx, op)
		wg.Wait()
		ca.Close()
		cb.Close()
		r.release(slow, other)
		if _, ok := op.FinalAnswer(); !ok {
			r.front.UntilFinal(ctx, op, deadline, true)
		}
		if r.Log != nil {
			r.Log("race %s: %s", op.Key, summary(op.Answers()))
		}
	}
}

// summary is a short account of an op's attempts, for the log.
func summary(as []Attempt) string {
	var b []byte
	for i, a := range as {
		if i > 0 {
			b = append(b, ", "...)
		}
		switch {
		case a.Status == 0:
			b = fmt.Appendf(b, "no answer (%.40s)", a.Err)
		case a.Replayed:
			b = fmt.Appendf(b, "%d replayed", a.Status)
		case a.Status == 409 && a.RetryAfter != "":
			b = fmt.Appendf(b, "409 %s", problemName(a.Body))
		default:
			b = fmt.Appendf(b, "%d", a.Status)
		}
		b = fmt.Appendf(b, " after %s", a.Took.Round(time.Millisecond))
	}
	return string(b)
}

// problemName is the last part of a problem response's type URI.
func problemName(body []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	if i := strings.LastIndexByte(p.Type, '#'); i >= 0 {
		return p.Type[i+1:]
	}
	return p.Type
}
