package idem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idem-dev/idem/store"
)

// respond sends a result to the client and records it on the request's
// Event. It is the one place where the middleware writes a response.
func (m *Middleware) respond(q *request, res result) {
	q.event.Outcome, q.event.Err = res.outcome, res.err
	switch res.outcome {
	case OutcomeExecuted, OutcomeFailed:
		m.sendCaptured(q, res.captured, res.stored)
	case OutcomeReplayed:
		m.sendStored(q, res.replayed, true)
	case OutcomeInFlight:
		m.problem(q, ProblemInFlight, http.StatusConflict, "A request with this "+m.cfg.Header+" is in progress; retry after a moment.")
	case OutcomeLeaseLost:
		m.problem(q, ProblemLeaseLost, http.StatusConflict, "This attempt lost its hold on the "+m.cfg.Header+" and was rolled back; retry after a moment.")
	case OutcomeMismatch:
		m.problem(q, ProblemKeyReused, http.StatusUnprocessableEntity,
			"This "+m.cfg.Header+" was already used for a different request ("+res.first.Method+" "+res.first.Path+" with another body). Use a new key for a new request.")
	case OutcomeStoreError:
		m.problem(q, ProblemStoreUnavailable, http.StatusServiceUnavailable, "The idempotency store is unavailable; retry with the same key.")
	case OutcomeAbandoned:
		// The client has gone, or the handler panicked (the panic goes on
		// up): there is no one to answer.
	default:
		m.problem(q, res.problem, res.status, res.detail)
	}
}

// sendStored sends a stored response byte for byte with its stored
// headers: to a retry, with Idempotent-Replayed: true; or to the first
// caller, when what was stored replaced the handler's response.
func (m *Middleware) sendStored(q *request, resp *store.Response, replayed bool) {
	q.event.StatusCode = resp.StatusCode
	h := q.w.Header()
	for k, v := range resp.Header {
		h[k] = append([]string(nil), v...) // resp may be cached: never share its slices
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	q.w.WriteHeader(resp.StatusCode)
	_, _ = q.w.Write(resp.Body)
}

// sendCaptured sends the handler's response: every header it set (the
// first caller may get a cookie a retry never will), and the body as
// stored. A stored replacement of an oversized body wins.
func (m *Middleware) sendCaptured(q *request, c *capture, stored *store.Response) {
	switch {
	case stored != nil && c.overflow:
		m.sendStored(q, stored, false)
		return
	case c.overflow:
		// Not stored and not complete: never send a truncated body.
		m.problem(q, ProblemResponseTooLarge, http.StatusInternalServerError, "The response exceeded the size the idempotency layer can hold.")
		return
	}
	q.event.StatusCode = c.statusCode()
	h := q.w.Header()
	for k, v := range c.header {
		h[k] = v
	}
	q.w.WriteHeader(c.statusCode())
	_, _ = q.w.Write(c.body.Bytes())
}

// problem sends a problem response. An answer that asks for a retry (409
// in flight or lease lost, 503) carries Retry-After.
func (m *Middleware) problem(q *request, t ProblemType, status int, detail string) {
	q.event.StatusCode = status
	h := q.w.Header()
	h.Set("Content-Type", "application/problem+json")
	if t == ProblemInFlight || t == ProblemLeaseLost || t == ProblemStoreUnavailable {
		h.Set("Retry-After", strconv.Itoa(m.retryAfterSeconds()))
	}
	q.w.WriteHeader(status)
	_, _ = q.w.Write(m.problemBody(t, status, detail))
}

// problemBody renders an RFC 9457 problem details body.
func (m *Middleware) problemBody(t ProblemType, status int, detail string) []byte {
	b, err := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail,omitempty"`
	}{m.cfg.ProblemTypeBase + string(t), problemTitles[t], status, detail})
	if err != nil {
		panic(fmt.Sprintf("idem: marshal problem: %v", err)) // strings and an int always marshal
	}
	return append(b, '\n')
}

func (m *Middleware) retryAfterSeconds() int {
	s := int((m.cfg.RetryAfter + 999_999_999) / 1_000_000_000)
	return max(s, 1)
}
