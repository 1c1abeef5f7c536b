package idem

import (
	"container/list"
	"sync"
	"time"

	"github.com/idem-dev/idem/store"
)

// replayCache holds COMPLETED records in memory, bounded by bytes and
// evicting the least recently used, so that a retry of a request this
// process answered costs no round trip to the store.
//
// It is safe because a COMPLETED record never changes while it binds its
// key: nothing updates it until retention ends (then a new request may
// re-acquire it, and the sweeper may delete it). An entry therefore lives
// until shortly before the record's expiry, by this process's clock, and
// never longer. The store stays the source of truth: a miss goes to the
// store, and a record is cached only once its completion has committed.
type replayCache struct {
	max int64
	// cacheable, when not nil, leaves out the responses it refuses
	// (Config.ReplayCacheableFunc).
	cacheable func(store.Response) bool
	// margin is how long before a record's expiry its entry goes
	// (cacheMargin).
	margin time.Duration

	mu    sync.Mutex
	size  int64
	lru   *list.List // of *cacheEntry, most recent first
	items map[cacheKey]*list.Element
}

type cacheKey struct{ scope, key string }

type cacheEntry struct {
	k     cacheKey
	rec   *store.Record
	until time.Time
	size  int64
}

// cacheMargin is how long before a record's expiry its entry goes: room
// for the skew between this process's clock and the store's, by which
// expiry is judged. At most a tenth of the TTL.
func cacheMargin(ttl time.Duration) time.Duration { return min(time.Minute, ttl/10) }

// entryOverhead is what an entry costs beyond its strings, body and
// headers: the record, its response, the header map, the list element and
// the map slot, as TestReplayCacheBytesIsWhatItCosts measures them.
const entryOverhead = 800

// headerNameCost and headerValueCost are what a header name (its string,
// its slice of values, its share of the map) and a value's string header
// cost beyond their bytes.
const (
	headerNameCost  = 100
	headerValueCost = 16
)

func newReplayCache(maxBytes int64, margin time.Duration, cacheable func(store.Response) bool) *replayCache {
	if maxBytes <= 0 {
		return nil
	}
	return &replayCache{max: maxBytes, margin: margin, cacheable: cacheable, lru: list.New(), items: map[cacheKey]*list.Element{}}
}

// get returns the cached record of scope and key, or nil. A nil cache
// holds nothing.
func (c *replayCache) get(scope, key string, now time.Time) *store.Record {
	if c == nil {
		return nil
	}
	k := cacheKey{scope, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.until) {
		c.remove(el)
		return nil
	}
	c.lru.MoveToFront(el)
	return e.rec
}

// put caches a COMPLETED record until the cache's margin before its
// expiry. Other records, records too close to expiry and records larger
// than the whole cache are not cached.
func (c *replayCache) put(rec *store.Record, now time.Time) {
	if c == nil || rec.Status != store.StatusCompleted || rec.Response == nil || rec.Expired ||
		(c.cacheable != nil && !c.cacheable(*rec.Response)) {
		return
	}
	until := rec.ExpiresAt.Add(-c.margin)
	if !now.Before(until) {
		return
	}
	size := recordSize(rec)
	if size > c.max {
		return
	}
	k := cacheKey{rec.Scope, rec.Key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
	c.items[k] = c.lru.PushFront(&cacheEntry{k: k, rec: rec, until: until, size: size})
	c.size += size
	for c.size > c.max {
		c.remove(c.lru.Back())
	}
}

// remove drops an entry; c.mu is held.
func (c *replayCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.items, e.k)
	c.size -= e.size
}

// recordSize is what a cached record costs in memory: the bytes it
// holds, the body's by its capacity (a captured body keeps the buffer it
// was written to), and the overheads above.
func recordSize(rec *store.Record) int64 {
	n := entryOverhead + len(rec.Scope) + len(rec.Key) + len(rec.Fingerprint.Method) +
		len(rec.Fingerprint.Path) + cap(rec.Fingerprint.Hash) + len(rec.Token) + len(rec.RecoveryPoint) +
		cap(rec.Response.Body) + len(rec.Response.ResourceType) + len(rec.Response.ResourceID)
	for k, vs := range rec.Response.Header {
		n += headerNameCost + len(k)
		for _, v := range vs {
			n += headerValueCost + len(v)
		}
	}
	return int64(n)
}

// ReplayCacheStats is what the replay cache holds (Middleware.ReplayCache).
type ReplayCacheStats struct {
	Entries int
	Bytes   int64 // roughly what the entries cost in memory
	Max     int64 // Config.ReplayCacheBytes; 0: no cache
}

// ReplayCache reports what the replay cache holds now, for operators.
func (m *Middleware) ReplayCache() ReplayCacheStats {
	c := m.cache
	if c == nil {
		return ReplayCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return ReplayCacheStats{Entries: len(c.items), Bytes: c.size, Max: c.max}
}
