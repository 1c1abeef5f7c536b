package conns

import (
	"net"
	"sync"
)

// sourceListener closes at once a connection whose source IP already has
// max open, so that one client cannot hold the listener's whole MaxConns
// and make every other one wait in the backlog.
type sourceListener struct {
	net.Listener
	max  int
	mu   sync.Mutex // guards open
	open map[string]int
}

func (l *sourceListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c)
		l.mu.Lock()
		full := l.open[src] >= l.max
		if !full {
			l.open[src]++
		}
		l.mu.Unlock()
		if full {
			_ = c.Close()
			continue
		}
		return &sourceConn{Conn: c, release: func() { l.release(src) }}, nil
	}
}

func (l *sourceListener) release(src string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src]--; l.open[src] == 0 {
		delete(l.open, src)
	}
}

// sourceOf is c's remote IP, without its port.
func sourceOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// sourceConn gives its source's place back once, on its first Close.
type sourceConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *sourceConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
