package idem

import "errors"

// Errors a Store returns. Stores translate their driver's errors into these
// at their boundary, so the middleware never inspects a driver error.
var (
	// ErrNotFound: the key has no record.
	ErrNotFound = errors.New("idem: record not found")
	// ErrLockLost: the attempt's fencing token no longer holds the record;
	// another attempt re-acquired it.
	ErrLockLost = errors.New("idem: lock lost to another attempt")
	// ErrWaitTimeout: a transaction waited longer than TxOptions.LockWait for
	// another transaction holding the same key.
	ErrWaitTimeout = errors.New("idem: timed out waiting for a concurrent request with the same key")
	// ErrKeyExists: a deferred claim (Config.DeferClaim) found the key
	// already recorded when the request completed; the store aborted the
	// transaction with the handler's writes, and the middleware answers the
	// request from the record.
	ErrKeyExists = errors.New("idem: the key is already recorded; this attempt is discarded")
	// ErrTxAborted: the transaction was aborted by an earlier error (in
	// PostgreSQL, a failed statement the handler did not roll back to a
	// savepoint); nothing more can run in it.
	ErrTxAborted = errors.New("idem: transaction aborted by an earlier error")
)
