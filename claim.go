package idem

import (
	"context"

	"github.com/google/uuid"
)

// maxClaimRounds bounds the insert/re-acquire loop. Each round loses only to
// another request that changed the record in between, so more rounds than
// this means the key is busy: the request is answered 409.
const maxClaimRounds = 4

// acquire takes the key for q through k: the store itself (leased mode) or
// a transaction (atomic mode). The atomic INSERT is the only arbiter of who
// executes; a record that exists is re-acquired by a conditional UPDATE that
// exactly one contender wins. When q does not get the key, acquire returns
// the record that decides its answer (nil: busy, answer 409).
func (m *Middleware) acquire(ctx context.Context, k Keys, q *request) (held bool, rec *Record, err error) {
	for range maxClaimRounds {
		q.claim.Token = uuid.NewString()
		rec, inserted, err := k.Insert(ctx, q.claim)
		if err != nil {
			return false, nil, err
		}
		if inserted {
			return true, nil, nil
		}
		if rec == nil {
			continue // swept between the insert and the read
		}
		if m.judge(q, rec) != verdictReacquire {
			return false, rec, nil
		}
		won, err := k.Reacquire(ctx, q.claim, rec.LockToken)
		if err != nil {
			return false, nil, err
		}
		if won {
			q.event.Reacquired = true
			return true, nil, nil
		}
	}
	return false, nil, nil
}

func (q *request) lock() Lock {
	return Lock{Scope: q.claim.Scope, Key: q.claim.Key, Token: q.claim.Token}
}
