package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// FaultKind is a fault of the network between one replica and PostgreSQL.
type FaultKind string

// The connection faults.
const (
	// FaultSlow delays every packet from PostgreSQL: slow queries, lease
	// renewals that arrive late, front-proxy timeouts.
	FaultSlow FaultKind = "slow"
	// FaultCut closes every connection and refuses new ones.
	FaultCut FaultKind = "cut"
	// FaultReset answers the next packet of every connection with a TCP RST,
	// new connections included.
	FaultReset FaultKind = "reset"
	// FaultHang swallows everything sent to PostgreSQL and closes the
	// connection when the fault ends: a half-open connection.
	FaultHang FaultKind = "hang"
)

// FaultKinds are all the connection faults, in the order the table lists
// them.
var FaultKinds = []FaultKind{FaultSlow, FaultCut, FaultReset, FaultHang}

// Link is a toxiproxy proxy, in-process, between one replica and
// PostgreSQL: a fault on it hits that replica alone.
type Link struct {
	mu    sync.Mutex // serialises faults on this link
	proxy *toxiproxy.Proxy
}

// Links is one Link per replica slot.
type Links struct {
	server *toxiproxy.ApiServer
	links  []*Link
}

// NewLinks starts n proxies to upstream on loopback ports.
func NewLinks(upstream string, n int) (*Links, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	ls := &Links{server: srv}
	for i := range n {
		p := toxiproxy.NewProxy(srv, fmt.Sprintf("replica%d-db", i), "127.0.0.1:0", upstream)
		if err := p.Start(); err != nil {
			ls.Close()
			return nil, fmt.Errorf("start toxiproxy: %w", err)
		}
		ls.links = append(ls.links, &Link{proxy: p})
	}
	return ls, nil
}

// Addr is the address a replica in slot i connects to PostgreSQL through.
func (ls *Links) Addr(i int) string { return ls.links[i].proxy.Listen }

// Close stops every proxy.
func (ls *Links) Close() {
	for _, l := range ls.links {
		l.proxy.Stop()
	}
}

// Heal removes every toxic and reopens every cut link.
func (ls *Links) Heal() error {
	var errs []string
	for _, l := range ls.links {
		l.mu.Lock()
		l.proxy.Toxics.ResetToxics(context.Background())
		if err := l.reopen(); err != nil {
			errs = append(errs, err.Error())
		}
		l.mu.Unlock()
	}
	if errs != nil {
		return fmt.Errorf("heal links: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Inject puts fault kind on slot i's link for d, then lifts it. It returns
// when the fault is over, or at once when the link already has one.
func (ls *Links) Inject(ctx context.Context, i int, kind FaultKind, d time.Duration) (bool, error) {
	l := ls.links[i]
	if !l.mu.TryLock() {
		return false, nil
	}
	defer l.mu.Unlock()
	var toxic string
	switch kind {
	case FaultCut:
		l.proxy.Stop()
		wait(ctx, d)
		return true, l.reopen()
	case FaultSlow:
		// 200 ms to 1 s a packet: a request that needs a few round trips
		// outlasts the front proxy's timeout, which sends it elsewhere
		// while this replica still runs it.
		toxic = latencyToxic(200*time.Millisecond + time.Duration(time.Now().UnixNano()%int64(800*time.Millisecond)))
	case FaultReset:
		toxic = `{"name":"chaos","type":"reset_peer","stream":"upstream","toxicity":1,"attributes":{"timeout":0}}`
	case FaultHang:
		toxic = fmt.Sprintf(`{"name":"chaos","type":"timeout","stream":"upstream","toxicity":1,"attributes":{"timeout":%d}}`, d.Milliseconds())
	default:
		return false, fmt.Errorf("unknown fault %q", kind)
	}
	return true, l.withToxic(ctx, kind, toxic, d, nil)
}

// Slow delays every packet from PostgreSQL to slot i by latency for d,
// calling applied once the delay is in place. It reports false, at once,
// when the link already has a fault.
func (ls *Links) Slow(ctx context.Context, i int, latency, d time.Duration, applied func()) (bool, error) {
	l := ls.links[i]
	if !l.mu.TryLock() {
		return false, nil
	}
	defer l.mu.Unlock()
	return true, l.withToxic(ctx, FaultSlow, latencyToxic(latency), d, applied)
}

func latencyToxic(latency time.Duration) string {
	ms := latency.Milliseconds()
	return fmt.Sprintf(`{"name":"chaos","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`, ms, ms/4)
}

// withToxic adds toxic, waits d (or until ctx ends) and removes it. The
// caller holds l.mu.
func (l *Link) withToxic(ctx context.Context, kind FaultKind, toxic string, d time.Duration, applied func()) error {
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
		return fmt.Errorf("add %s toxic: %w", kind, err)
	}
	if applied != nil {
		applied()
	}
	wait(ctx, d)
	if err := l.proxy.Toxics.RemoveToxic(context.Background(), "chaos"); err != nil {
		return fmt.Errorf("remove %s toxic: %w", kind, err)
	}
	return nil
}

func wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// reopen starts a stopped proxy on its old port again, retrying for a while
// in case the port is briefly taken.
func (l *Link) reopen() error {
	var err error
	for range 50 {
		if err = l.proxy.Start(); err == nil || err == toxiproxy.ErrProxyAlreadyStarted {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("reopen %s on %s: %w", l.proxy.Name, l.proxy.Listen, err)
}
