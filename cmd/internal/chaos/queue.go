package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The queue door of paymentsd (docs/queues.md): commands on
// payments.commands.{deposits,transactions} of the stream PAYMENTS, answers
// on the Reply-To subject and on payments.results.
const (
	commandSubject = "payments.commands."
	resultsSubject = "payments.results"
	// answersStream keeps every answer paymentsd publishes, across broker
	// restarts: the record the queue phase is checked against. Each command
	// names a reply subject of its own, replySubject.<producer>.<n>.
	answersStream = "CHAOS_ANSWERS"
	replySubject  = resultsSubject + ".chaos" // under paymentsd's reply prefix
	natsStream    = "PAYMENTS"
	natsDurable   = "paymentsd"
)

// The shares of the queue phase's commands.
const (
	queueReuse    = 0.08 // an answered key again with another body: 422, nothing moves
	queuePoor     = 0.08 // a conversion of more than the balance: 402, stored as final
	queueConvert  = 0.25 // a conversion the balance may cover: 201, or 402
	queueDouble   = 0.25 // published two or three times at once
	queueFireOnce = 0.20 // published until JetStream acknowledges it, never again
)

// Command is one queue command: an Op (one key, one body) published as a
// message; its Attempts are the answers published to its reply subject.
type Command struct {
	*Op
	Producer int
	Seq      int // its reply subject's last token
	// FireOnce: published again only on a publish error, never once
	// JetStream acknowledged it, so that only redelivery can bring it to
	// its effect: what a lost command would show.
	FireOnce bool
	acked    atomic.Int32 // publishes JetStream acknowledged
}

// Acked is how many of its publishes JetStream acknowledged.
func (c *Command) Acked() int { return int(c.acked.Load()) }

func (c *Command) subject() string { return commandSubject + strings.TrimPrefix(c.Path, "/v1/") }

func (c *Command) replyTo() string { return fmt.Sprintf("%s.%d.%d", replySubject, c.Producer, c.Seq) }

// Queue is the queue phase of a mode: a JetStream cluster of its own,
// producers each its own user, the kills of its nodes, and the answers,
// read back at the end.
type Queue struct {
	Broker    *Broker
	prof      Profile
	stats     *Stats
	logf      func(string, ...any)
	nc        *nats.Conn
	js        jetstream.JetStream
	answers   jetstream.Stream
	Producers []*Producer
	heard     heard
	results   []Attempt // answers on payments.results, read by Collect
	resultKey []string  // their keys
}

// StartQueue starts the cluster (the nats-server binary natsServer, its
// logs in logDir) and the stream of answers; users are the producers'.
func StartQueue(ctx context.Context, p Profile, natsServer, logDir string, users []*User, stats *Stats, seed uint64, logf func(string, ...any)) (*Queue, error) {
	b, err := StartBroker(ctx, natsServer, logDir, p.BrokerNodes)
	if err != nil {
		return nil, err
	}
	q := &Queue{Broker: b, prof: p, stats: stats, logf: logf}
	if q.nc, err = connect(b.URL(), "chaos"); err != nil {
		q.Close()
		return nil, err
	}
	q.js, err = jetstream.New(q.nc)
	if err == nil {
		q.answers, err = q.js.CreateStream(ctx, jetstream.StreamConfig{Name: answersStream,
			Subjects: []string{replySubject + ".>", resultsSubject}, Storage: jetstream.FileStorage, Replicas: b.Nodes()})
	}
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("stream %s: %w", answersStream, err)
	}
	if err := q.listen(); err != nil {
		q.Close()
		return nil, err
	}
	for i, u := range users {
		pr, err := newProducer(i, u, q, seed+uint64(i))
		if err != nil {
			q.Close()
			return nil, err
		}
		q.Producers = append(q.Producers, pr)
	}
	return q, nil
}

func connect(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", url, err)
	}
	return nc, nil
}

// Close closes the producers' connections and stops the broker.
func (q *Queue) Close() {
	if q == nil {
		return
	}
	for _, p := range q.Producers {
		p.nc.Close()
	}
	if q.nc != nil {
		q.nc.Close()
	}
	q.heard.close()
	q.Broker.Close()
}

// Run publishes commands until stop, killing nodes of the cluster while
// faults last, then lets every command still unanswered be published again (but
// the fire-once ones) until quiet, and returns once every command has its
// final answer, or at quiet.
func (q *Queue) Run(ctx, faults context.Context, stop, quiet time.Time) {
	if q == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { q.kills(ctx, faults) })
	for _, p := range q.Producers {
		for range q.prof.QueueLanes {
			wg.Go(func() { p.lane(ctx, stop, quiet) })
		}
	}
	wg.Wait()
	open := 0
	for _, c := range q.Commands() {
		if !c.answered() {
			open++
		}
	}
	q.logf("queue: producers done %s after the faults; %d of %d commands without a final answer",
		time.Since(stop).Round(100*time.Millisecond), open, len(q.Commands()))
}

// kills SIGKILLs a node of the cluster BrokerRestarts times while faults
// last, evenly spaced and off the beat of the database restarts, and
// starts it again after BrokerDown: first the leader of PAYMENTS, then the
// leader of paymentsd's durable consumer, in turn.
func (q *Queue) kills(ctx, faults context.Context) {
	n := q.prof.BrokerRestarts
	if n <= 0 {
		return
	}
	every := q.prof.Duration / time.Duration(n+1)
	next := every * 7 / 10
	for i := range n {
		select {
		case <-faults.Done():
			return
		case <-time.After(next):
		}
		next = every
		if err := q.killLeader(ctx, i%2 == 1); err != nil {
			q.logf("queue: kill a NATS node: %v", err)
		}
	}
}

// killLeader SIGKILLs the leader of PAYMENTS (of the durable consumer
// when consumer), logs how long until another node leads it, and starts
// the killed node again after BrokerDown.
func (q *Queue) killLeader(ctx context.Context, consumer bool) error {
	what := natsStream
	if consumer {
		what = natsStream + "/" + natsDurable
	}
	leader := func() string {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		s, err := q.js.Stream(lctx, natsStream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return ""
		}
		if !consumer {
			return s.CachedInfo().Cluster.Leader
		}
		c, err := s.Consumer(lctx, natsDurable)
		if err != nil || c.CachedInfo().Cluster == nil {
			return ""
		}
		return c.CachedInfo().Cluster.Leader
	}
	old := leader()
	if old == "" {
		return fmt.Errorf("%s has no leader to kill", what)
	}
	start := time.Now()
	if err := q.Broker.Kill(old); err != nil {
		return err
	}
	q.stats.BrokerRestarts.Add(1)
	if !consumer {
		q.stats.BrokerLeaderKills.Add(1)
	}
	// The node stays down at least BrokerDown, and until another leads.
	for deadline := start.Add(time.Minute); ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		if now := leader(); now != "" && now != old {
			q.logf("queue: NATS node %s, leader of %s, SIGKILLed; %s leads it after %s", old, what, now, time.Since(start).Round(10*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			q.logf("queue: NATS node %s, leader of %s, SIGKILLed; no other node leads it after %s", old, what, time.Since(start).Round(10*time.Millisecond))
			break
		}
	}
	time.Sleep(time.Until(start.Add(q.prof.BrokerDown)))
	if err := q.Broker.Restart(ctx, old); err != nil {
		return err
	}
	q.logf("queue: NATS node %s back and current %s after its kill", old, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// Commands are every producer's commands.
func (q *Queue) Commands() []*Command {
	var cs []*Command
	for _, p := range q.Producers {
		cs = append(cs, p.cmds...)
	}
	return cs
}

// Collect reads every answer the stream of answers holds onto its command,
// and those published to payments.results.
func (q *Queue) Collect(ctx context.Context) error {
	info, err := q.answers.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", answersStream, err)
	}
	last := info.State.LastSeq
	for _, c := range q.Commands() {
		c.mu.Lock()
		c.Attempts = nil // what the producer saw is in the stream too
		c.mu.Unlock()
	}
	oc, err := q.answers.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("stream %s: %w", answersStream, err)
	}
	for seen := uint64(0); seen < last; {
		batch, err := oc.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("read %s: %w", answersStream, err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if md, err := msg.Metadata(); err == nil {
				seen = md.Sequence.Stream
			}
			q.file(msg.Subject(), msg.Headers(), msg.Data())
		}
		if err := batch.Error(); err != nil || got == 0 {
			return fmt.Errorf("read %s: %d of %d answers: %v", answersStream, seen, last, err)
		}
	}
	q.fillFromHeard()
	return nil
}

// file records one stored answer.
func (q *Queue) file(subject string, h nats.Header, data []byte) {
	a := answer(h, data)
	if subject == resultsSubject {
		q.results = append(q.results, a)
		q.resultKey = append(q.resultKey, h.Get("Idempotency-Key"))
		return
	}
	var p, n int
	if _, err := fmt.Sscanf(strings.TrimPrefix(subject, replySubject+"."), "%d.%d", &p, &n); err != nil ||
		p < 0 || p >= len(q.Producers) || n < 0 || n >= len(q.Producers[p].cmds) {
		q.logf("an answer on %s, which no command named", subject)
		return
	}
	q.stats.QueueAnswers.Add(1)
	if a.Replayed {
		q.stats.QueueReplays.Add(1)
	}
	q.Producers[p].cmds[n].record(a)
}

// answer reads a published answer as the HTTP response it stands for.
func answer(h nats.Header, data []byte) Attempt {
	status, _ := strconv.Atoi(h.Get("Idem-Status"))
	return Attempt{Status: status, Body: data, Replayed: h.Get("Idempotent-Replayed") == "true",
		RetryAfter: h.Get("Retry-After"), Err: h.Get("Idem-Outcome")}
}

// Producer publishes one user's commands, from a few lanes at once, each
// waiting for its command's final answer before the next.
type Producer struct {
	ID   int
	User *User
	q    *Queue
	nc   *nats.Conn
	js   jetstream.JetStream

	mu   sync.Mutex // guards rng, cmds, bal
	rng  *rand.Rand
	cmds []*Command
	bal  map[string]int64 // what its acknowledged deposits and conversions make
}

func newProducer(id int, u *User, q *Queue, seed uint64) (*Producer, error) {
	nc, err := connect(q.Broker.URL(), fmt.Sprintf("chaos-producer-%d", id))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Producer{ID: id, User: u, q: q, nc: nc, js: js, rng: rand.New(rand.NewPCG(seed, uint64(id))), bal: map[string]int64{}}, nil
}

// lane makes commands until stop, each to its final answer or quiet.
func (p *Producer) lane(ctx context.Context, stop, quiet time.Time) {
	for time.Now().Before(stop) && ctx.Err() == nil {
		c, dup := p.next()
		p.send(ctx, c, dup, quiet)
		if a, ok := c.FinalAnswer(); ok && a.Status == http.StatusCreated {
			p.learn(c, a)
		}
	}
}

// next builds the producer's next command; dup is how many extra copies
// of its first publish to send at once.
func (p *Producer) next() (*Command, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := len(p.cmds)
	c := &Command{Op: &Op{User: p.User, Key: fmt.Sprintf("q-%d", seq), Scenario: "queue"}, Producer: p.ID, Seq: seq}
	p.cmds = append(p.cmds, c)
	// Amounts end in the user's tag and grow with seq: each is this
	// user's only one, so a business row names its command.
	tag := int64(p.ID%50 + 50)
	amount := func(base int64) int64 { return 100*(base+int64(seq)) + tag }
	r := p.rng.Float64()
	var prior *Command
	if seq > 0 {
		prior = p.cmds[p.rng.IntN(seq)]
	}
	switch {
	case r < queueReuse && prior != nil && prior.Kind != OpReuse && prior.answered():
		c.Kind, c.Key, c.Path, c.Reused = OpReuse, prior.Key, prior.Path, prior.Op
		c.Body = transfer(c.Path, "USD", "EUR", amount(5_000_000))
	case r < queueReuse+queuePoor:
		c.Kind, c.Path, c.Scenario = OpTransaction, "/v1/transactions", "queue-402"
		c.Body = transfer(c.Path, "USD", "EUR", amount(1_000_000_000))
	case r < queueReuse+queuePoor+queueConvert && p.bal["USD"] > 100*100_000:
		c.Kind, c.Path = OpTransaction, "/v1/transactions"
		c.Body = transfer(c.Path, "USD", "EUR", amount(100))
	default:
		c.Kind, c.Path = OpDeposit, "/v1/deposits"
		c.Body = transfer(c.Path, "USD", "", amount(10_000))
	}
	c.FireOnce = p.rng.Float64() < queueFireOnce
	dup := 0
	if p.rng.Float64() < queueDouble {
		dup = 1 + p.rng.IntN(2)
	}
	return c, dup
}

// transfer is the JSON body of a deposit (dst "") or a conversion.
func transfer(path, src, dst string, amount int64) []byte {
	if path == "/v1/deposits" {
		return fmt.Appendf(nil, `{"currency":%q,"amount":%d}`, src, amount)
	}
	return fmt.Appendf(nil, `{"source_currency":%q,"target_currency":%q,"amount":%d}`, src, dst, amount)
}

func (c *Command) answered() bool {
	_, ok := c.FinalAnswer()
	return ok
}

func (p *Producer) learn(c *Command, a Attempt) {
	row, err := describe(c.Op, a.Body)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if row.kind == "deposit" {
		p.bal[row.src] += row.amount
	} else {
		p.bal[row.src] -= row.amount
	}
}

// send publishes c, and dup copies of it at once, then waits for its final
// answer, publishing it again with the same key whenever none comes within
// the profile's QueueTimeout (but a fire-once command), until quiet.
func (p *Producer) send(ctx context.Context, c *Command, dup int, quiet time.Time) {
	p.publish(ctx, c, quiet)
	for range dup {
		p.q.stats.QueueDuplicates.Add(1)
		p.publish(ctx, c, quiet)
	}
	for {
		if p.await(ctx, c, time.Now().Add(p.q.prof.QueueTimeout), quiet) || !time.Now().Before(quiet) || ctx.Err() != nil {
			return
		}
		if !c.FireOnce || c.Acked() == 0 {
			p.q.stats.QueueRepublishes.Add(1)
			p.publish(ctx, c, quiet)
		}
	}
}

// publish publishes c until JetStream acknowledges it once, or quiet.
func (p *Producer) publish(ctx context.Context, c *Command, quiet time.Time) {
	msg := &nats.Msg{Subject: c.subject(), Data: c.Body, Header: nats.Header{
		"Idempotency-Key": {c.Key}, "Authorization": {"Bearer " + p.User.APIKey}, "Reply-To": {c.replyTo()},
	}}
	for backoff := 50 * time.Millisecond; time.Now().Before(quiet) && ctx.Err() == nil; backoff = min(2*backoff, time.Second) {
		p.q.stats.QueuePublishes.Add(1)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := p.js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			c.acked.Add(1)
			return
		}
		p.q.stats.QueuePublishErrors.Add(1)
		time.Sleep(backoff)
	}
}

// await polls the stream of answers for c's final answer until until,
// and reports whether there is one. The stream, not a subscription, is
// asked: an answer published while the broker restarted is not lost to
// it, whereas a subscription would miss it.
func (p *Producer) await(ctx context.Context, c *Command, until, quiet time.Time) bool {
	until = minTime(until, quiet)
	for {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		m, err := p.q.answers.GetLastMsgForSubject(gctx, c.replyTo())
		cancel()
		if err == nil && answer(m.Header, m.Data).Final() {
			c.record(answer(m.Header, m.Data))
			return true
		}
		if a, ok := p.q.heard.final(c.replyTo()); ok {
			c.record(a)
			return true
		}
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // the broker is restarting
		}
		if !time.Now().Before(until) || ctx.Err() != nil {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// startQueue starts the queue phase with users as its producers; nil when
// the profile has none. A nil *Queue does nothing.
func (m *modeRun) startQueue(ctx context.Context, users []*User) (*Queue, error) {
	if m.Profile.QueueProducers == 0 {
		return nil, nil
	}
	q, err := StartQueue(ctx, m.Profile, m.NATSServer, m.logDir, users, m.stats, m.seed+97, m.logf)
	if err != nil {
		return nil, err
	}
	m.logf("queue: a JetStream cluster of %d nodes at %s; %d producers", q.Broker.Nodes(), q.Broker.URL(), len(users))
	return q, nil
}

// Args are the replicas' flags that make them consume the commands.
func (q *Queue) Args() []string {
	if q == nil {
		return nil
	}
	return []string{"--nats-url", q.Broker.URL(), "--nats-replicas", strconv.Itoa(q.Broker.Nodes())}
}
