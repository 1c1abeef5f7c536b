package idem

import (
	"bytes"
	"time"

	"github.com/idem-dev/idem/store"
)

// verdict is what an existing record means for a request with the same key.
type verdict int

const (
	verdictReacquire verdict = iota // FAILED, lease expired, or past retention: try to take it over
	verdictReplay                   // COMPLETED: replay the stored response
	verdictInFlight                 // PROCESSING with a live lease: 409
	verdictMismatch                 // the key was used for another request: 422
)

// judge decides what an existing record means for q. A record past
// retention no longer binds its key, unless an attempt still holds it: a
// live lease is never taken over.
func (m *Middleware) judge(q *request, rec *store.Record) verdict {
	live := rec.Status == store.StatusProcessing && rec.LeaseLive
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
	case rec.Status == store.StatusCompleted:
		return verdictReplay
	case live:
		return verdictInFlight
	}
	return verdictReacquire
}

// sameRequest compares q with a stored fingerprint, using the algorithm
// version the record was made with.
func (m *Middleware) sameRequest(q *request, stored store.Fingerprint) bool {
	fp := q.claim.Fingerprint
	if stored.Version != fp.Version {
		if q.r == nil {
			return false // Do's fingerprints are the caller's: one version only
		}
		var err error
		if fp, err = m.fingerprint(stored.Version, q.r, fp.Path, q.body); err != nil {
			return false
		}
	}
	return fp.Method == stored.Method && fp.Path == stored.Path && bytes.Equal(fp.Hash, stored.Hash)
}

// answerFrom answers q from a record the store returned, as answer does,
// and keeps a COMPLETED one in the replay cache.
func (m *Middleware) answerFrom(q *request, rec *store.Record) (result, bool) {
	res, answered := m.answer(q, rec)
	if res.outcome == OutcomeReplayed {
		m.cache.put(rec, time.Now())
	}
	return res, answered
}

// answer answers q from an existing record when the record decides the
// answer (replay, 409, 422). It reports false when the key is to be
// claimed instead.
func (m *Middleware) answer(q *request, rec *store.Record) (result, bool) {
	switch m.judge(q, rec) {
	case verdictReplay:
		return result{outcome: OutcomeReplayed, replayed: rec.Response}, true
	case verdictInFlight:
		return inFlight(), true
	case verdictMismatch:
		return result{outcome: OutcomeMismatch, first: rec.Fingerprint}, true
	}
	return result{}, false
}
