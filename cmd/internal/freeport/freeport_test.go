package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbackIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if p < floor || p >= low {
			t.Fatalf("port %d outside [%d, %d)", p, floor, low)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d was given as free: %v", p, err)
		}
		ln.Close()
	}
}
