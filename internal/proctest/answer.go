package proctest

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"time"
)

// Answer reads an HTTP/1.1 response on conn, waiting at most d, and sends
// its status to statuses: 0 if the server closed conn unanswered, -1 if d
// passed first. Run it in a goroutine per connection.
func Answer(conn net.Conn, d time.Duration, statuses chan<- int) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		statuses <- -1
	case err != nil:
		statuses <- 0
	default:
		_ = resp.Body.Close()
		statuses <- resp.StatusCode
	}
}
