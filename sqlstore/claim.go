package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// deferredClaim is an atomic-mode claim held back until the completion.
type deferredClaim struct {
	c   *store.Claim // nil: no claim deferred
	ran bool
	err error
}

// DeferClaim holds the claim of c back until Complete, which then records
// the key as COMPLETED with its response in one insert.
func (t *Tx) DeferClaim(c store.Claim) bool {
	if t.closed || t.claim.c != nil {
		return false
	}
	t.claim.c = &c
	return true
}

// DeferredClaimResult reports whether the deferred claim has run, and its
// error.
func (t *Tx) DeferredClaimResult() (ran bool, err error) { return t.claim.ran, t.claim.err }

func (t *Tx) pendingClaim() bool { return t.claim.c != nil && !t.claim.ran }

// claimAndComplete runs the deferred claim: a plain insert of the
// completed record, which waits (bounded) for a transaction holding the
// key and fails on a recorded one. Then the transaction is rolled back
// here, with all the handler's writes: PostgreSQL has aborted it already,
// MySQL failed the statement alone.
func (t *Tx) claimAndComplete(ctx context.Context, resp store.Response) error {
	c := t.claim.c
	fp := c.Fingerprint
	s := t.st.sql.insertCompleted
	args := appendResponseArgs(append(make([]any, 0, 8+responseArgCount),
		c.Scope, c.Key, fp.Method, fp.Path, fp.Hash, fp.Version, c.Token, c.TTL.Microseconds()), resp)
	_, err := txSession{t}.bounded(ctx, func(q querier) (sql.Result, error) {
		return q.ExecContext(ctx, s.sql, s.args(args...)...)
	})
	t.claim.ran = true
	if err == nil {
		return nil
	}
	if t.st.dialect.classify(err) == errDuplicate {
		err = fmt.Errorf("%w (%w)", store.ErrKeyExists, err)
	}
	if t.tx != nil {
		_ = t.tx.Rollback()
	}
	t.closed = true
	t.claim.err = err
	return fmt.Errorf("complete: %w", err)
}
