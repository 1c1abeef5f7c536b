// Package freeport finds loopback TCP ports for the servers the test
// harnesses start on a port of their choosing: a NATS node or a PostgreSQL
// that is killed and started again on the same port.
//
// A port the kernel hands out for "127.0.0.1:0" comes from the ephemeral
// range, the same range it takes the local ports of outgoing connections
// from. Between the probe and the server's bind, or between a kill and a
// restart, any connection on the machine can take it, and the server then
// fails with "address already in use". The ports given here lie below the
// ephemeral range, where only a listener that asks for one can land.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// floor is the lowest port handed out: above the well-known and most
// registered service ports (PostgreSQL 5432, RabbitMQ 5672, NATS 4222 and
// 6222, Redis 6379, 8080).
const floor = 10000

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports this process has handed out
)

// Loopback is a port free on 127.0.0.1 now, below the kernel's ephemeral
// range and never handed out before by this process.
func Loopback() (int, error) {
	lo, hi := floor, ephemeralLow()
	if hi <= lo {
		return 0, fmt.Errorf("freeport: the ephemeral range starts at %d, no room below it above %d", hi, lo)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if given[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("freeport: no free loopback port in [%d, %d) after 200 tries", lo, hi)
}

// ephemeralLow is the first port of the kernel's ephemeral range: Linux's
// ip_local_port_range, else the IANA range's start.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 49152
}
