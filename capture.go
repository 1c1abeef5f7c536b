package idem

import (
	"bytes"
	"net/http"
)

// capture is the ResponseWriter a handler writes to: it holds the response
// back until the key's completion has committed, so a client never sees a
// response that a crash could still undo.
type capture struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	limit    int64
	overflow bool // the body grew past limit; what was written past it is dropped
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
}

func (c *capture) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	if room := c.limit - int64(c.body.Len()); int64(len(p)) > room {
		c.overflow = true
		c.body.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.body.Write(p)
}

// Flush does nothing: nothing may reach the client before the commit. It
// exists so that handlers which flush still work.
func (c *capture) Flush() {}

// statusCode is the response status, 200 when the handler wrote nothing.
func (c *capture) statusCode() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}
