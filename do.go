package idem

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idem-dev/idem/store"
)

// Call is one keyed unit of work as a door other than net/http presents it:
// a gRPC method, a queue message. The door authenticates (Scope) and
// fingerprints the request itself, over what identifies it (the method and
// the message's deterministic bytes, say).
type Call struct {
	Scope       string            // whose call it is (a user, a tenant); empty → OutcomeScopeMissing
	Key         string            // as received: a bare key or an RFC 8941 string (ParseKey)
	Fingerprint store.Fingerprint // Version FingerprintVersion unless the door versions its own
	// Method and Route label the Event: the full gRPC method, the queue
	// subject.
	Method string
	Route  string
	// Resumes, when set, is the fencing token an unfinished record was
	// listed with (store.Unfinished.Token), and makes Do that record's
	// take-over in leased mode: the key is held only through
	// store.Store.ResumeUnfinished, never claimed afresh nor
	// re-acquired into a new life, so a record finished, re-acquired or
	// swept since the listing is left alone (OutcomeInFlight, when not
	// answered from the record). Package completer sets it.
	Resumes string
}

// Response is a response in HTTP's terms, whatever the door: a status (2xx, 3xx
// and 4xx but 408 and 429 are final and stored; anything else frees
// the key for a retry), headers, and the body's bytes. A door maps it to its own
// (gRPC codes, a published result).
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Result is how Do ended: its Outcome, the Response the caller gets, and
// what went wrong.
type Result struct {
	Outcome Outcome
	// Response is what the caller gets: the work's response (executed or
	// failed), the stored one (replayed), or the problem response the
	// HTTP door would send (anything else); nil when abandoned. A replayed
	// Body may be the replay cache's own bytes: read it, never write it.
	Response *Response
	// Replayed: Response is the first attempt's, stored.
	Replayed bool
	// Problem names the problem the middleware answered with itself
	// (ProblemKeyReused, …), for a door that names it in its own terms;
	// empty when Response is the work's.
	Problem ProblemType
	// Err is what went wrong, as Event.Err says.
	Err error
}

// Do runs work once for c's key, with the same store, state machine and
// promise as Require: a retry gets the stored response, a key reused with
// another fingerprint gets 422, a key in flight 409. work runs with a
// context that carries the store's transaction (pgstore.DB) and the key
// (KeyFromContext); in atomic mode a ctx that ends before the commit rolls
// the work back. A panic in work is re-raised after the key is freed.
func (m *Middleware) Do(ctx context.Context, c Call, work func(ctx context.Context) Response) Result {
	q := m.begin(ctx)
	q.event = Event{Mode: m.cfg.Mode, Method: c.Method, Path: c.Route, Route: c.Route}
	defer m.observe(q)
	res := m.doCall(q, c, work)
	q.event.Outcome, q.event.Err = res.outcome, res.err
	resp, ok, replayed, problem := m.response(res)
	out := Result{Outcome: res.outcome, Replayed: replayed, Problem: problem, Err: res.err}
	if ok {
		q.event.StatusCode = resp.StatusCode
		out.Response = &resp
	}
	return out
}

func (m *Middleware) doCall(q *request, c Call, work func(ctx context.Context) Response) result {
	key, res, ok := m.identify(q, c.Scope, []string{c.Key})
	if !ok {
		return res
	}
	q.claim = m.newClaim(c.Scope, key, c.Fingerprint)
	if c.Resumes != "" {
		if !m.caps.Unfinished || m.cfg.Mode != ModeLeased {
			return storeFailed(fmt.Errorf("resume: %w", ErrNoRecoveryPoints))
		}
		q.resumes = c.Resumes
	}
	q.work = func(ctx context.Context, w http.ResponseWriter) {
		r := work(ctx)
		h := w.Header()
		for k, v := range r.Header {
			h[k] = v
		}
		w.WriteHeader(r.StatusCode)
		_, _ = w.Write(r.Body)
	}
	return m.execute(q)
}

// ProblemResponse is the problem response the HTTP door sends for t (rendered
// by Config.ProblemFunc when set), for a door that refuses a request before
// it reaches Do (a message whose body cannot be fingerprinted), so that its
// answer reads as the HTTP one would.
func (m *Middleware) ProblemResponse(t ProblemType, status int, detail string) Response {
	return *m.problemResponse(t, status, detail)
}
