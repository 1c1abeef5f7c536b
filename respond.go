package idem

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"

	"github.com/idem-dev/idem/store"
)

// respond sends a result to an HTTP client and records it on the request's
// Event. It is the one place where the middleware writes a response.
func (m *Middleware) respond(w http.ResponseWriter, q *request, res result) {
	q.event.Outcome, q.event.Err = res.outcome, res.err
	resp, ok, replayed, _ := m.response(res)
	if !ok {
		return // abandoned: the client has gone, or the handler panicked
	}
	q.event.StatusCode = resp.StatusCode
	h := w.Header()
	if c := res.captured; c != nil && !c.overflow {
		// The handler's own headers: storedResponse copied what it keeps.
		maps.Copy(h, resp.Header)
	} else {
		for k, v := range resp.Header {
			h[k] = append([]string(nil), v...) // it may be cached: never share its slices
		}
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(resp.Body)
}

// response is what a result sends: the handler's response as it wrote it
// (every header: the first caller may get a cookie a retry never will),
// the stored one, or a problem response of type problem. An abandoned
// request has none (!ok). It is a value, not a pointer: the HTTP door
// sends it and keeps nothing.
func (m *Middleware) response(res result) (resp Response, ok, replayed bool, problem ProblemType) {
	switch res.outcome {
	case OutcomeAbandoned:
		return Response{}, false, false, ""
	case OutcomeReplayed:
		return responseOf(res.replayed), true, true, ""
	case OutcomeExecuted, OutcomeFailed:
		c := res.captured
		switch {
		case c.overflow && res.stored != nil:
			return responseOf(res.stored), true, false, ProblemResponseTooLarge
		case !c.overflow:
			return Response{StatusCode: c.statusCode(), Header: c.header, Body: c.body.Bytes()}, true, false, ""
		}
		// Not stored and not complete: never send a truncated body.
		res = rejected(res.outcome, ProblemResponseTooLarge, http.StatusInternalServerError, "The response exceeded the size the idempotency layer can hold.")
	}
	t, status, detail := m.problemOf(res)
	resp = *m.problemResponse(t, status, detail)
	if t == ProblemInFlight || t == ProblemLeaseLost || t == ProblemStoreUnavailable {
		resp.Header.Set("Retry-After", strconv.Itoa(m.retryAfterSeconds()))
	}
	return resp, true, false, t
}

func responseOf(resp *store.Response) Response {
	return Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: resp.Body}
}

// problemOf is the problem a result answers with when the middleware
// answers itself.
func (m *Middleware) problemOf(res result) (ProblemType, int, string) {
	switch res.outcome {
	case OutcomeInFlight:
		return ProblemInFlight, http.StatusConflict, "A request with this " + m.cfg.Header + " is in progress; retry after a moment."
	case OutcomeLeaseLost:
		return ProblemLeaseLost, http.StatusConflict, "This attempt lost its hold on the " + m.cfg.Header + " and was rolled back; retry after a moment."
	case OutcomeMismatch:
		return ProblemKeyReused, http.StatusUnprocessableEntity,
			"This " + m.cfg.Header + " was already used for a different request (" + res.first.Method + " " + res.first.Path + " with another body). Use a new key for a new request."
	case OutcomeStoreError:
		return ProblemStoreUnavailable, http.StatusServiceUnavailable, "The idempotency store is unavailable; retry with the same key."
	}
	return res.problem, res.status, res.detail
}

// problemResponse renders a problem the middleware answers with:
// Config.ProblemFunc's way, or as RFC 9457 problem details.
func (m *Middleware) problemResponse(t ProblemType, status int, detail string) *Response {
	p := Problem{Type: t, URI: m.cfg.ProblemTypeBase + string(t), Title: problemTitles[t], Status: status, Detail: detail}
	if m.cfg.ProblemFunc != nil {
		r := m.cfg.ProblemFunc(p)
		r.Header = r.Header.Clone() // the middleware adds to it
		if r.Header == nil {
			r.Header = http.Header{}
		}
		r.Header.Set(HeaderShouldRetry, strconv.FormatBool(t.shouldRetry(status)))
		return &r
	}
	b, err := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail,omitempty"`
	}{p.URI, p.Title, p.Status, p.Detail})
	if err != nil {
		panic(fmt.Sprintf("idem: marshal problem: %v", err)) // strings and an int always marshal
	}
	return &Response{StatusCode: status, Body: append(b, '\n'), Header: http.Header{
		"Content-Type":    {"application/problem+json"},
		HeaderShouldRetry: {strconv.FormatBool(t.shouldRetry(status))},
	}}
}

func (m *Middleware) retryAfterSeconds() int {
	s := int((m.cfg.RetryAfter + 999_999_999) / 1_000_000_000)
	return max(s, 1)
}
