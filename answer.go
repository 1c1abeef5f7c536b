package idem

import (
	"bytes"
	"net/http"
	"time"
)

// verdict is what an existing record means for a request with the same key.
type verdict int

const (
	verdictReacquire verdict = iota // FAILED, lock expired, or past retention: try to take it over
	verdictReplay                   // COMPLETED: replay the stored response
	verdictInFlight                 // PROCESSING with a live lock: 409
	verdictMismatch                 // the key was used for another request: 422
)

// judge decides what an existing record means for q. A record past
// retention no longer binds its key, unless an attempt still holds it: a
// live lease is never taken over.
func (m *Middleware) judge(q *request, rec *Record) verdict {
	live := rec.Status == StatusProcessing && rec.LockLive
	if rec.Expired {
		if live {
			return verdictInFlight
		}
		return verdictReacquire
	}
	if !m.sameRequest(q, rec.Fingerprint) {
		return verdictMismatch
	}
	switch {
	case rec.Status == StatusCompleted:
		return verdictReplay
	case live:
		return verdictInFlight
	}
	return verdictReacquire
}

// sameRequest compares q with a stored fingerprint, using the algorithm
// version the record was made with.
func (m *Middleware) sameRequest(q *request, stored Fingerprint) bool {
	fp := q.fp
	if stored.Version != fp.Version {
		var err error
		if fp, err = fingerprintWith(stored.Version, q.r, q.body); err != nil {
			return false
		}
	}
	return fp.Method == stored.Method && fp.Path == stored.Path && bytes.Equal(fp.Hash, stored.Hash)
}

// answer responds to q from an existing record when the record decides the
// answer (replay, 409, 422). It reports false when the caller should go on
// to claim the key.
func (m *Middleware) answer(q *request, rec *Record) bool {
	switch m.judge(q, rec) {
	case verdictReplay:
		if !q.cached {
			m.cache.put(rec, time.Now())
		}
		m.replay(q, rec.Response)
	case verdictInFlight:
		m.inFlight(q)
	case verdictMismatch:
		q.event.Outcome = OutcomeMismatch
		m.reject(q, ProblemKeyReused, http.StatusUnprocessableEntity,
			"This "+m.cfg.Header+" was already used for a different request ("+rec.Fingerprint.Method+" "+rec.Fingerprint.Path+" with another body). Use a new key for a new request.")
	default:
		return false
	}
	return true
}

func (m *Middleware) inFlight(q *request) {
	q.event.Outcome = OutcomeInFlight
	m.reject(q, ProblemInFlight, http.StatusConflict, "A request with this "+m.cfg.Header+" is in progress; retry after a moment.")
}

// replay sends a stored response byte for byte, with the stored headers and
// Idempotent-Replayed: true.
func (m *Middleware) replay(q *request, resp *Response) {
	q.event.Outcome = OutcomeReplayed
	q.event.StatusCode = resp.StatusCode
	h := q.w.Header()
	for k, v := range resp.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set("Idempotent-Replayed", "true")
	q.w.WriteHeader(resp.StatusCode)
	_, _ = q.w.Write(resp.Body)
}
