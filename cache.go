package idem

import (
	"encoding/binary"
	"hash/maphash"
	"math"
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
//
// Each entry is one encoded record (cacheblob.go) in a slot of one array,
// found through a map of hashes: the garbage collector follows one
// pointer per entry, to bytes it does not scan. A full cache of records
// kept as Go values cost the collector a fifth of a busy process's CPU.
type replayCache struct {
	max int64
	// cacheable, when not nil, leaves out the responses it refuses
	// (Config.ReplayCacheableFunc).
	cacheable func(store.Response) bool
	// margin is how long before a record's expiry its entry goes
	// (cacheMargin).
	margin time.Duration
	seed   maphash.Seed

	mu    sync.Mutex
	size  int64
	items map[uint64]int32 // the hash of scope and key → its slot
	slots []cacheSlot
	// head and tail are the most and least recently used slots, free the
	// first unused one; noSlot for none.
	head, tail, free int32
}

// cacheSlot is an entry of the cache, or an unused slot (blob nil) in the
// free list (next).
type cacheSlot struct {
	blob       []byte // the encoded record: scope and key first
	hash       uint64
	until      int64 // Unix nanoseconds: the entry ends then
	size       int64
	prev, next int32
}

const noSlot = -1

// cacheMargin is how long before a record's expiry its entry goes: room
// for the skew between this process's clock and the store's, by which
// expiry is judged. At most a tenth of the TTL.
func cacheMargin(ttl time.Duration) time.Duration { return min(time.Minute, ttl/10) }

// entryOverhead is what an entry costs beyond its encoded record: its
// slot and its share of the map, with the slack of their growth, as
// TestReplayCacheBytesIsWhatItCosts measures them.
const entryOverhead = 128

func newReplayCache(maxBytes int64, margin time.Duration, cacheable func(store.Response) bool) *replayCache {
	if maxBytes <= 0 {
		return nil
	}
	return &replayCache{max: maxBytes, margin: margin, cacheable: cacheable, seed: maphash.MakeSeed(),
		items: map[uint64]int32{}, head: noSlot, tail: noSlot, free: noSlot}
}

// hash is the map's key for scope and key.
func (c *replayCache) hash(scope, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	// The scope's length first: no two scope and key pairs write the same
	// bytes. Two with one hash all the same are told apart by decodeCached.
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(scope)))
	_, _ = h.Write(n[:])
	_, _ = h.WriteString(scope)
	_, _ = h.WriteString(key)
	return h.Sum64()
}

// get returns the cached record of scope and key, or nil. A nil cache
// holds nothing.
func (c *replayCache) get(scope, key string, now time.Time) *store.Record {
	if c == nil {
		return nil
	}
	h := c.hash(scope, key)
	c.mu.Lock()
	i, ok := c.items[h]
	if !ok {
		c.mu.Unlock()
		return nil
	}
	e := &c.slots[i]
	if unixNano(now) >= e.until {
		c.remove(i)
		c.mu.Unlock()
		return nil
	}
	c.unlink(i)
	c.pushFront(i)
	blob := e.blob // never written again: decoded outside the lock
	c.mu.Unlock()
	return decodeCached(blob, scope, key)
}

// put caches a COMPLETED record until the cache's margin before its
// expiry. Other records, records too close to expiry, records larger than
// the whole cache, and the outcome-unknown answer, which an operator may
// still release or replace (store.Capabilities.Resolve) from any process, are not
// cached.
func (c *replayCache) put(rec *store.Record, now time.Time) {
	if c == nil || rec.Status != store.StatusCompleted || rec.Response == nil || rec.Expired ||
		store.AwaitsOperator(rec.Status, rec.Response) || (c.cacheable != nil && !c.cacheable(*rec.Response)) {
		return
	}
	until := rec.ExpiresAt.Add(-c.margin)
	if !now.Before(until) {
		return
	}
	sz := sizeCached(rec)
	size := entryOverhead + int64(sz.n)
	if size > c.max {
		return
	}
	blob := encodeCached(rec, sz)
	h := c.hash(rec.Scope, rec.Key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.items[h]; ok {
		c.remove(i)
	}
	i := c.free
	if i == noSlot {
		if len(c.slots) == math.MaxInt32 {
			return // 2³¹ entries: no slot left to number
		}
		i = int32(len(c.slots))
		c.slots = append(c.slots, cacheSlot{})
	} else {
		c.free = c.slots[i].next
	}
	c.slots[i] = cacheSlot{blob: blob, hash: h, until: unixNano(until), size: size}
	c.pushFront(i)
	c.items[h] = i
	c.size += size
	for c.size > c.max {
		c.remove(c.tail)
	}
}

// remove drops slot i's entry and frees the slot; c.mu is held.
func (c *replayCache) remove(i int32) {
	c.unlink(i)
	e := &c.slots[i]
	delete(c.items, e.hash)
	c.size -= e.size
	*e = cacheSlot{next: c.free}
	c.free = i
}

// unlink takes slot i out of the recency list; c.mu is held.
func (c *replayCache) unlink(i int32) {
	e := &c.slots[i]
	if e.prev == noSlot {
		c.head = e.next
	} else {
		c.slots[e.prev].next = e.next
	}
	if e.next == noSlot {
		c.tail = e.prev
	} else {
		c.slots[e.next].prev = e.prev
	}
}

// pushFront makes slot i the most recently used; c.mu is held.
func (c *replayCache) pushFront(i int32) {
	e := &c.slots[i]
	e.prev, e.next = noSlot, c.head
	if c.head != noSlot {
		c.slots[c.head].prev = i
	}
	c.head = i
	if c.tail == noSlot {
		c.tail = i
	}
}

// ReplayCacheStats is what the replay cache holds (Middleware.ReplayCache).
type ReplayCacheStats struct {
	Entries int
	Bytes   int64 // roughly what the entries cost in memory
	Max     int64 // Config.ReplayCacheBytes; 0: no cache (a negative ReplayCacheBytes)
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
