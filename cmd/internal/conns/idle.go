package conns

import (
	"net"
	"net/http"
	"sync"
)

// idleBound closes a keep-alive connection that goes idle while max others
// already are, so idle connections (a goroutine and buffers each) cannot
// pile up. A client finds its connection closed and opens another: HTTP
// allows either side to close an idle connection.
type idleBound struct {
	max  int
	mu   sync.Mutex // guards idle
	idle map[net.Conn]struct{}
}

func newIdleBound(max int) *idleBound {
	return &idleBound{max: max, idle: map[net.Conn]struct{}{}}
}

// connState is an http.Server's ConnState hook.
func (b *idleBound) connState(c net.Conn, state http.ConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if state != http.StateIdle {
		delete(b.idle, c)
		return
	}
	if len(b.idle) >= b.max {
		_ = c.Close() // the server sees the close and reports StateClosed
		return
	}
	b.idle[c] = struct{}{}
}
