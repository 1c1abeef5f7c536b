package idem

import (
	"context"
	"errors"
	"net/http"
)

// ending is how running the handler ended: final, retriable, panicked,
// client gone or hold ended. It is not an Outcome, which is how the whole
// request ended as the Event reports it.
type ending struct {
	kind     endingKind
	captured *capture
	cause    error // why the hold ended early (endedHoldLost), or the client's leaving
	panicked any   // the panic value (endedPanicked)
}

type endingKind int

const (
	endedFinal      endingKind = iota // 2xx, 3xx, or a 4xx but 408 and 429: the request's last word
	endedRetriable                    // 5xx, 408, 429: the client may retry
	endedPanicked                     // the handler panicked
	endedClientGone                   // atomic mode: the client left before the commit
	endedHoldLost                     // leased mode: the lease was lost, lapsed, or passed its maximum life
)

// run calls the handler with the held key's context, capturing its
// response, and says how it ended. lapsed: the key was taken over from an
// attempt whose lease ran out.
func (m *Middleware) run(hctx context.Context, q *request, h holder, lapsed bool) (out ending) {
	q.runs++
	c := &q.first.captured
	if q.runs > 1 {
		c = new(capture)
	}
	*c = capture{header: make(http.Header), limit: m.cfg.MaxResponseBytes}
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover()
		cause := h.stop(q)
		if p == nil {
			// runtime.Goexit (t.FailNow in a test, say): nothing after
			// this function runs, so it cleans up here.
			m.abandon(q, h, errors.Join(errors.New("handler called runtime.Goexit"), cause))
			return
		}
		out = ending{kind: endedPanicked, captured: c, panicked: p}
	}()
	hctx, p := m.handlerContext(hctx, q, lapsed)
	if q.work != nil {
		q.work(hctx, c)
	} else {
		q.serveNext(hctx, c)
	}
	returned = true

	cause := h.stop(q)
	status := c.statusCode()
	switch {
	case errors.Is(cause, ErrLeaseMaxLife), cause != nil && !isFinal(status):
		// Past its maximum life the handler's answer is never stored: the
		// key may be another attempt's by now. A lost lease's failure is
		// not the client's answer either: the attempt that took the key
		// over has it.
		return ending{kind: endedHoldLost, captured: c, cause: cause}
	case m.cfg.Mode.atomic() && q.ctx.Err() != nil:
		return ending{kind: endedClientGone, captured: c, cause: q.ctx.Err()}
	case !isFinal(status), p.isPending():
		// Pending (phase.go): the answer is not stored; the key is
		// freed with its recovery point for a retry or a completer.
		return ending{kind: endedRetriable, captured: c}
	}
	return ending{kind: endedFinal, captured: c}
}

// isFinal reports whether a status is the request's last word: 2xx, 3xx and
// 4xx except 408 and 429, which ask for a retry.
func isFinal(status int) bool {
	return status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}
