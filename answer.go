package idem

import (
	"bytes"
	"time"

	"github.com/idem-dev/idem/store"
)

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
// answer: replay a COMPLETED one, 409 while an attempt holds it with a
// live lease, 422 for a key used for another request. It reports false
// when the key is to be claimed instead: FAILED, lease expired, or past
// retention. A record past retention no longer binds its key, unless an
// attempt still holds it: a live lease is never taken over.
func (m *Middleware) answer(q *request, rec *store.Record) (result, bool) {
	live := rec.Status == store.StatusProcessing && rec.LeaseLive
	switch {
	case rec.Expired && live:
		return inFlight(), true
	case rec.Expired:
		return result{}, false
	case !m.sameRequest(q, rec.Fingerprint):
		return result{outcome: OutcomeKeyReused, first: rec.Fingerprint}, true
	case rec.Status == store.StatusCompleted:
		return result{outcome: OutcomeReplayed, replayed: rec.Response}, true
	case live:
		return inFlight(), true
	}
	return result{}, false
}
