package chaos

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// heard is what subscriptions, one on each node of the cluster and bound to
// it, heard on the commands' reply subjects. paymentsd publishes an answer
// as a core NATS message: the answers stream stores it only if it has a
// leader at that moment, and while a killed node's streams elect another,
// an answer every subscriber got can be missing from the stream. A node
// killed takes one subscription with it, never the others. The stream
// stays the record; what only a subscription heard fills its gaps, and is
// counted.
type heard struct {
	conns []*nats.Conn

	mu   sync.Mutex           // guards msgs
	msgs map[string][]Attempt // by subject, each distinct answer once
}

// listen subscribes on every node of q's cluster.
func (q *Queue) listen() error {
	q.heard.msgs = map[string][]Attempt{}
	for i, url := range q.Broker.NodeURLs() {
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("chaos-listener-%d", i)), nats.IgnoreDiscoveredServers(),
			nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("nats %s: %w", url, err)
		}
		q.heard.conns = append(q.heard.conns, nc)
		if _, err := nc.Subscribe(replySubject+".>", q.heard.hear); err != nil {
			return fmt.Errorf("subscribe on %s: %w", url, err)
		}
		if err := nc.Flush(); err != nil {
			return fmt.Errorf("subscribe on %s: %w", url, err)
		}
	}
	return nil
}

func (h *heard) hear(m *nats.Msg) {
	a := answer(m.Header, m.Data)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.msgs[m.Subject] {
		if o.Status == a.Status && o.Replayed == a.Replayed && o.Err == a.Err && bytes.Equal(o.Body, a.Body) {
			return // the same answer, heard on another node
		}
	}
	h.msgs[m.Subject] = append(h.msgs[m.Subject], a)
}

// on is what was heard on subject.
func (h *heard) on(subject string) []Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Attempt(nil), h.msgs[subject]...)
}

// final is a final answer heard on subject.
func (h *heard) final(subject string) (Attempt, bool) {
	for _, a := range h.on(subject) {
		if a.Final() {
			return a, true
		}
	}
	return Attempt{}, false
}

func (h *heard) close() {
	for _, nc := range h.conns {
		nc.Close()
	}
}

// fillFromHeard gives each command the answers stream holds no final
// answer for the answers a subscription heard on its reply subject.
func (q *Queue) fillFromHeard() {
	for _, c := range q.Commands() {
		if c.answered() {
			continue
		}
		for _, a := range q.heard.on(c.replyTo()) {
			q.stats.QueueHeardOnly.Add(1)
			q.stats.QueueAnswers.Add(1)
			if a.Replayed {
				q.stats.QueueReplays.Add(1)
			}
			c.record(a)
		}
	}
}
