package pgstore

import (
	"errors"
	"fmt"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// insertCompletedOrAbort claims the key and completes it in one insert: the
// record is born COMPLETED with its response, at the end of the request's
// transaction, pipelined with the COMMIT. It is the deferred claim of an
// atomic-mode request (idem.ModeAtomicDeferred). The unique key is still
// the arbiter: a concurrent duplicate's insert waits for this transaction
// and then finds the key taken. When the key is already recorded the
// statement fails with a division by zero, which aborts the transaction
// with all the handler's writes, so the COMMIT behind it does not run.
const insertCompletedOrAbort = `
WITH claimed AS (` + pgsql.InsertCompleted + `
ON CONFLICT (scope, idempotency_key) DO NOTHING
RETURNING 1)
SELECT 1 / count(*) FROM claimed`

// DeferClaim holds the claim of c back until the completion, which then
// records the key and its response in one insert (insertCompletedOrAbort):
// a fresh request's key costs one statement in the round trip of the
// COMMIT, and nothing else.
func (t *Tx) DeferClaim(c store.Claim) bool { return t.claim.Defer(c, t.closed) }

// DeferredClaimResult reports whether the deferred claim has run, and its
// error.
func (t *Tx) DeferredClaimResult() (ran bool, err error) { return t.claim.Result() }

// queueClaimAndComplete queues the deferred claim with its response on b.
// The claim's own token is the lock: nothing else held the key.
func (t *Tx) queueClaimAndComplete(b *pgx.Batch, resp store.Response) {
	b.Queue(pgsql.LockWait(t.wait))
	b.Queue(t.s.sql.insertCompletedOrAbort, engine.InsertCompletedArgs(*t.claim.Claim(), resp)...)
}

// claimRan reads the results of the two statements queueClaimAndComplete
// queued and records how the claim went.
func (t *Tx) claimRan(br pgx.BatchResults) error {
	_, err := br.Exec()
	if isQueued(err) {
		return err // a write of the handler's failed first: the claim never ran
	}
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		return t.claim.Ran(nil)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == codeDivisionByZero {
		err = fmt.Errorf("%w (%w)", store.ErrKeyExists, err)
	}
	return t.claim.Ran(translate(err))
}
