package idem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/store"
)

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
	case OutcomeKeyReused:
		return ProblemKeyReused, http.StatusUnprocessableEntity,
			"This " + m.cfg.Header + " was already used for a different request (" + res.first.Method + " " + res.first.Path + " with another body). Use a new key for a new request."
	case OutcomeStoreUnavailable:
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

// storedResponse is what the record keeps of a captured response: its
// status, allow-listed headers and body; or, when the body was over the
// limit, a problem response saying so, which says what the handler's
// status said: a 2xx or 3xx took effect (500: the answer is lost), a 4xx
// refused the request (its status is kept: still final, nothing happened).
func (m *Middleware) storedResponse(c *capture) store.Response {
	if c.overflow {
		status, detail := http.StatusInternalServerError,
			fmt.Sprintf("The request took effect, but its response exceeded %d bytes and was not stored. Look the result up instead of retrying.", m.cfg.MaxResponseBytes)
		if code := c.statusCode(); code >= 400 {
			status, detail = code, fmt.Sprintf("The request was refused with status %d and took no effect, but the refusal exceeded %d bytes and was not stored. Change the request rather than retrying it.",
				code, m.cfg.MaxResponseBytes)
		}
		r := m.problemResponse(ProblemResponseTooLarge, status, detail)
		return store.Response{StatusCode: r.StatusCode, Header: r.Header, Body: r.Body}
	}
	resp := store.Response{StatusCode: c.statusCode(), Header: http.Header{}, Body: c.body.Bytes()}
	// The values kept are copied into one array, each header's slice
	// capped at its own values so that an append never reaches the next.
	var values []string
	keep := func(name string, v []string) {
		if values == nil {
			values = make([]string, 0, m.replayedValues(c.header))
		}
		start := len(values)
		values = append(values, v...)
		resp.Header[name] = values[start:len(values):len(values)]
	}
	for _, h := range m.cfg.ReplayHeaders {
		if h == ReplayAllHeaders {
			for name, v := range c.header {
				if !neverReplayed[name] && !notReplayedByAll[name] {
					keep(name, v)
				}
			}
			break
		}
		if v := c.header.Values(h); len(v) > 0 {
			keep(h, v)
		}
	}
	resp.ResourceType, resp.ResourceID = ResourceOf(c.header.Get("Location"))
	return resp
}

// replayedValues counts the values of h that storedResponse keeps, at
// most: every value when ReplayHeaders replays them all.
func (m *Middleware) replayedValues(h http.Header) int {
	n := 0
	for _, name := range m.cfg.ReplayHeaders {
		if name == ReplayAllHeaders {
			n = 0
			for _, v := range h {
				n += len(v)
			}
			return n
		}
		n += len(h.Values(name))
	}
	return n
}

// ResourceOf names the resource a Location header points at, as a record
// keeps it (store.Response's ResourceType and ResourceID): its last two
// path segments, as in /v1/transactions/{id}.
func ResourceOf(location string) (typ, id string) {
	p := location
	if !plainPath(location) {
		u, err := url.Parse(location)
		if err != nil || u.Path == "" {
			return "", ""
		}
		p = u.Path
	}
	dir, id := path.Split(strings.TrimSuffix(p, "/"))
	return path.Base(dir), id
}

// plainPath reports whether location is a path that url.Parse would
// return as it is: rooted, not a network path (//host), and of visible
// ASCII with nothing to unescape, no query and no fragment.
func plainPath(location string) bool {
	if !strings.HasPrefix(location, "/") || strings.HasPrefix(location, "//") {
		return false
	}
	for i := 0; i < len(location); i++ {
		if c := location[i]; c <= ' ' || c >= 0x7f || c == '%' || c == '?' || c == '#' {
			return false
		}
	}
	return true
}
