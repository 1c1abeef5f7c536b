package pgstore

import (
	"errors"

	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL error codes the store translates.
const (
	codeLockNotAvailable = "55P03" // lock_timeout fired
	codeInFailedTx       = "25P02" // in_failed_sql_transaction
)

// translate turns a driver error into the library's sentinel errors, once,
// at the store boundary.
func translate(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case codeLockNotAvailable:
			return errors.Join(store.ErrWaitTimeout, err)
		case codeInFailedTx:
			return errors.Join(store.ErrTxAborted, err)
		}
	}
	return err
}
