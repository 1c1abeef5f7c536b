package client

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewKey returns a fresh idempotency key: a UUIDv7 (RFC 9562) whose 74
// random bits come from crypto/rand. Version 7 rather than 4: its first 48
// bits are the time in milliseconds, so a server's key index (a B-tree on
// the key within each user) grows at its right edge instead of splitting
// pages at random.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // variant 10
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
