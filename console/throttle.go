package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in throttling: each client address may fail signInBurst sign-ins in
// a row, then one every signInEvery; all addresses together globalBurst,
// then one every globalEvery. A token bucket each: a sign-in takes a token
// before the admin token is compared, and one that succeeds gives it back.
const (
	signInBurst = 5
	signInEvery = 12 * time.Second
	globalBurst = 50
	globalEvery = time.Second
	// maxTrackedAddrs bounds the addresses tracked. An address whose
	// bucket has filled again is forgotten first; past the bound, a new
	// address waits as a throttled one would.
	maxTrackedAddrs = 4096
)

// bucket is a token bucket: tokens at the time at.
type bucket struct {
	tokens float64
	at     time.Time
}

// fill adds the tokens earned since b.at, up to burst, and returns them.
func (b *bucket) fill(now time.Time, burst float64, every time.Duration) float64 {
	if b.at.IsZero() {
		b.tokens = burst
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(burst, b.tokens+float64(d)/float64(every))
	}
	b.at = now
	return b.tokens
}

// wait is how long until b holds a whole token again.
func (b *bucket) wait(every time.Duration) time.Duration {
	return time.Duration((1 - b.tokens) * float64(every))
}

// signInThrottle is the console's sign-in buckets. Its zero value is ready.
type signInThrottle struct {
	mu     sync.Mutex
	global bucket             // guarded by mu
	byAddr map[string]*bucket // guarded by mu; by client address
}

// take takes a token for a sign-in from addr: true, or false and how long
// until one is free (the address's or the global bucket, whichever is
// longer).
func (t *signInThrottle) take(addr string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byAddr == nil {
		t.byAddr = map[string]*bucket{}
	}
	b := t.byAddr[addr]
	if b == nil {
		if len(t.byAddr) >= maxTrackedAddrs {
			t.forgetFull(now)
		}
		if len(t.byAddr) >= maxTrackedAddrs {
			return signInEvery, false
		}
		b = &bucket{}
		t.byAddr[addr] = b
	}
	own, all := b.fill(now, signInBurst, signInEvery), t.global.fill(now, globalBurst, globalEvery)
	if own < 1 || all < 1 {
		var wait time.Duration
		if own < 1 {
			wait = b.wait(signInEvery)
		}
		if all < 1 {
			wait = max(wait, t.global.wait(globalEvery))
		}
		return wait, false
	}
	b.tokens--
	t.global.tokens--
	return 0, true
}

// refund gives back the token a successful sign-in from addr took.
func (t *signInThrottle) refund(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.byAddr[addr]; b != nil {
		b.fill(now, signInBurst, signInEvery)
		b.tokens = min(signInBurst, b.tokens+1)
	}
	t.global.fill(now, globalBurst, globalEvery)
	t.global.tokens = min(globalBurst, t.global.tokens+1)
}

// forgetFull drops the addresses whose bucket has filled again: they hold
// nothing a full new bucket would not.
func (t *signInThrottle) forgetFull(now time.Time) {
	for a, b := range t.byAddr {
		if b.fill(now, signInBurst, signInEvery) >= signInBurst {
			delete(t.byAddr, a)
		}
	}
}

// clientAddr is the address a sign-in is throttled by: the peer's IP (an
// IPv6 peer's /64, which one host can spread its requests over). The
// console trusts no forwarding header: it sits on the admin listener.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
