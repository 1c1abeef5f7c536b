package idem

import (
	"encoding/binary"
	"math"
	"net/http"
	"time"

	"github.com/idem-dev/idem/store"
)

// A cached record is one byte slice (replayCache), laid out as:
//
//	scope, key                     each a uvarint length and its bytes
//	the text's length, the text:   method, path, resource type and id,
//	                               the header count + 1 (0: nil) and the
//	                               value count, then
//	                               per header its name, its value count + 1
//	                               (0: nil) and its values
//	hash                           a uvarint length and its bytes
//	version, status code           uvarints
//	expiry                         a varint, Unix nanoseconds
//	body                           the rest
//
// Decoding makes one string of the text, which every name and value
// shares, and shares the hash and body with the slice, which nothing
// writes once it is cached.

// cachedSize is what encodeCached writes for a record: its length, its
// text's length, and its count of header values.
type cachedSize struct{ n, text, values int }

// sizeCached measures rec's encoding; put weighs a record by it before
// encoding it, and encodeCached allocates it.
func sizeCached(rec *store.Record) cachedSize {
	r := rec.Response
	var sz cachedSize
	for name, vs := range r.Header {
		sz.text += strLen(name) + uvarintLen(uint64(len(vs))+1)
		for _, v := range vs {
			sz.text += strLen(v)
		}
		sz.values += len(vs)
	}
	sz.text += strLen(rec.Fingerprint.Method) + strLen(rec.Fingerprint.Path) + strLen(r.ResourceType) + strLen(r.ResourceID) +
		uvarintLen(uint64(len(r.Header))+1) + uvarintLen(uint64(sz.values))
	sz.n = strLen(rec.Scope) + strLen(rec.Key) + uvarintLen(uint64(sz.text)) + sz.text +
		strLen(string(rec.Fingerprint.Hash)) + uvarintLen(uint64(rec.Fingerprint.Version)) + uvarintLen(uint64(r.StatusCode)) +
		varintLen(unixNano(rec.ExpiresAt)) + len(r.Body)
	return sz
}

// encodeCached encodes rec, which has a response, in the sz bytes
// sizeCached measured.
func encodeCached(rec *store.Record, sz cachedSize) []byte {
	r := rec.Response
	b := make([]byte, 0, sz.n)
	b = appendStr(b, rec.Scope)
	b = appendStr(b, rec.Key)
	b = binary.AppendUvarint(b, uint64(sz.text))
	for _, s := range [...]string{rec.Fingerprint.Method, rec.Fingerprint.Path, r.ResourceType, r.ResourceID} {
		b = appendStr(b, s)
	}
	b = binary.AppendUvarint(b, plusOne(len(r.Header), r.Header == nil))
	b = binary.AppendUvarint(b, uint64(sz.values))
	for name, vs := range r.Header {
		b = appendStr(b, name)
		b = binary.AppendUvarint(b, plusOne(len(vs), vs == nil))
		for _, v := range vs {
			b = appendStr(b, v)
		}
	}
	b = appendStr(b, string(rec.Fingerprint.Hash))
	b = binary.AppendUvarint(b, uint64(rec.Fingerprint.Version))
	b = binary.AppendUvarint(b, uint64(r.StatusCode))
	b = binary.AppendVarint(b, unixNano(rec.ExpiresAt))
	return append(b, r.Body...)
}

// plusOne is a count as the encoding keeps it: n + 1, or 0 for nil.
func plusOne(n int, isNil bool) uint64 {
	if isNil {
		return 0
	}
	return uint64(n) + 1
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// unixNano is t in Unix nanoseconds, held to what an int64 holds (the
// years 1678 to 2262): an expiry past them is kept as the last instant.
func unixNano(t time.Time) int64 {
	switch {
	case t.After(lastNano):
		return math.MaxInt64
	case t.Before(firstNano):
		return math.MinInt64
	}
	return t.UnixNano()
}

var firstNano, lastNano = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// varintLen is the length binary.AppendVarint writes: x zig-zag encoded.
func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeCached decodes a record encodeCached encoded, as COMPLETED, or
// returns nil when it is another scope's or key's (another key with the
// same hash).
func decodeCached(b []byte, scope, key string) *store.Record {
	d := blobReader{b: b}
	if string(d.bytes()) != scope || string(d.bytes()) != key {
		return nil
	}
	text := d.bytes()
	t := textReader{blobReader: blobReader{b: text}, s: string(text)}
	rec := &store.Record{Scope: scope, Key: key, Status: store.StatusCompleted}
	resp := &store.Response{}
	rec.Fingerprint.Method, rec.Fingerprint.Path = t.str(), t.str()
	resp.ResourceType, resp.ResourceID = t.str(), t.str()
	names, values := int(t.uvarint()), int(t.uvarint())
	if names > 0 {
		resp.Header = make(http.Header, names-1)
	}
	all := make([]string, 0, values)
	for range max(names-1, 0) {
		name, n := t.str(), int(t.uvarint())
		if n == 0 {
			resp.Header[name] = nil
			continue
		}
		start := len(all)
		for range n - 1 {
			all = append(all, t.str())
		}
		resp.Header[name] = all[start:len(all):len(all)]
	}
	rec.Fingerprint.Hash = d.bytes()
	rec.Fingerprint.Version = int(d.uvarint())
	resp.StatusCode = int(d.uvarint())
	rec.ExpiresAt = time.Unix(0, d.varint())
	resp.Body = b[d.i:len(b):len(b)]
	rec.Response = resp
	return rec
}

// blobReader reads what encodeCached appended, in order; the encoding is
// the cache's own, so it is never short.
type blobReader struct {
	b []byte
	i int
}

func (d *blobReader) uvarint() uint64 {
	x, n := binary.Uvarint(d.b[d.i:])
	d.i += n
	return x
}

func (d *blobReader) varint() int64 {
	x, n := binary.Varint(d.b[d.i:])
	d.i += n
	return x
}

// bytes returns the next length-prefixed bytes, capped at their end.
func (d *blobReader) bytes() []byte {
	n := int(d.uvarint())
	d.i += n
	return d.b[d.i-n : d.i : d.i]
}

// textReader reads the text of an encoded record: its lengths as a
// blobReader does, its strings as parts of s, the text's one copy.
type textReader struct {
	blobReader
	s string
}

func (t *textReader) str() string {
	n := int(t.uvarint())
	t.i += n
	return t.s[t.i-n : t.i]
}
