package pgstore

import (
	"errors"
	"fmt"
	"slices"

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

// lockKey is a key's lock (store.TxOptions.LockKey): a transaction-scoped
// advisory lock on a 64-bit hash of the scope and the key (the scope's
// length in front, so that no two pairs make one string), seeded with the
// key table's name. Two keys whose hashes collide only wait for each
// other; the record's unique key is still the arbiter of who records it.
const lockKey = `SELECT pg_advisory_xact_lock(hashtextextended(length($2) || ':' || $2 || $3, hashtextextended($1, 0)))`

// unrecordedOrAbort checks, under the key's lock, that the key has no
// record: when it has one, it fails with a division by zero, which aborts
// the transaction, so that the handler's statements behind it do not run.
// A statement of its own after the lock's, so that it reads what a holder
// committed while this transaction waited.
const unrecordedOrAbort = `
SELECT 1 / (count(*) = 0)::int FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2`

// queueLockKey queues k's lock in front of the transaction's first
// statement, its wait bounded as a claim's (pgsql.LockWait): BEGIN, the
// lock and that statement go in one round trip. The statement is the
// check a deferred claim adds behind the lock (DeferClaim), then the
// handler's first; or the middleware's read of a record to take over.
// Either comes after the lock, so that it sees the record a holder
// committed while this transaction waited.
func (t *Tx) queueLockKey(k store.KeyRef) {
	t.queued = append(t.queued,
		queuedWrite{what: "lock key", sql: pgsql.LockWait(t.wait), keyLock: true},
		queuedWrite{what: "lock key", sql: lockKey, args: []any{t.s.sql.table, k.Scope, k.Key}, keyLock: true},
		queuedWrite{what: "lock key", sql: pgsql.RestoreLockWait, keyLock: true})
}

// DeferClaim holds the claim of c back until the completion, which then
// records the key and its response in one insert (insertCompletedOrAbort):
// a fresh request's key costs one statement in the round trip of the
// COMMIT, and nothing else. When the key's lock has not been sent yet (the
// transaction's first statement is to come), the lock is the claim: it
// goes with the handler's first statement, and a check that the key has
// no record behind it (unrecordedOrAbort), which fails the claim and the
// statement when it has.
func (t *Tx) DeferClaim(c store.Claim) bool {
	if !t.claim.Defer(c, t.closed) {
		return false
	}
	if slices.ContainsFunc(t.queued, func(w queuedWrite) bool { return w.keyLock }) {
		t.queued = append(t.queued, queuedWrite{what: "lock key", sql: t.s.sql.unrecordedOrAbort, args: []any{c.Scope, c.Key}, keyLock: true})
	}
	return true
}

// lockFailed fails the deferred claim with the failure of the key's lock
// or of its check, translated: the key is recorded (store.ErrKeyExists) or
// the wait for it ran out (store.ErrWaitTimeout).
func (t *Tx) lockFailed(err error) {
	if t.claim.Pending() {
		_ = t.claim.Ran(err)
	}
}

// keyTaken is err, a statement's that aborts on a recorded key, with
// store.ErrKeyExists for that abort.
func keyTaken(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == codeDivisionByZero {
		return fmt.Errorf("%w (%w)", store.ErrKeyExists, err)
	}
	return err
}

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
	return t.claim.Ran(translate(keyTaken(err)))
}
