package store

import "errors"

// Errors a store returns. Stores translate their driver's errors into these
// at their boundary, so the middleware never inspects a driver error. Any
// other error is a store failure: the middleware answers 503.
var (
	// ErrNotFound: the key has no record.
	ErrNotFound = errors.New("idem: record not found")
	// ErrNotHeld: the attempt's fencing token no longer holds the record
	// (it is fenced off): another attempt took the key over, or, for an
	// operator's Release or ReplaceResponse, the record is no longer the
	// completed one the token names. It says nothing of a lease: atomic attempts and operators
	// hold no lease and get it too.
	ErrNotHeld = errors.New("idem: the attempt no longer holds the key")
	// ErrWaitTimeout: a transaction waited longer than TxOptions.MaxWait for
	// another transaction holding the same key.
	ErrWaitTimeout = errors.New("idem: timed out waiting for a concurrent request with the same key")
	// ErrKeyExists: a deferred claim (Tx.DeferClaim) found the key already
	// recorded when the request completed; the store aborted the
	// transaction with the handler's writes.
	ErrKeyExists = errors.New("idem: the key is already recorded; this attempt is discarded")
	// ErrTxAborted: the transaction was aborted by an earlier error (in
	// PostgreSQL, a failed statement the handler did not roll back to a
	// savepoint); nothing more can run in it.
	ErrTxAborted = errors.New("idem: transaction aborted by an earlier error")
	// ErrSweepBusy: another process holds the store's sweep lock, so this
	// one deleted nothing. It is not a failure; try again later.
	ErrSweepBusy = errors.New("idem: another sweep is running")
	// ErrUnsupported: the store does not serve the operation (its
	// Capabilities say so); the error wrapping it names the operation.
	ErrUnsupported = errors.New("idem: the store does not support this operation")
)
