package pgstore

import (
	"errors"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5/pgconn"
)

// translate turns a driver error into the library's sentinel errors, once,
// at the store boundary.
func translate(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgsql.Classify(pgErr.Code) {
		case engine.ErrLockTimeout:
			return errors.Join(store.ErrWaitTimeout, err)
		case engine.ErrInFailedTx:
			return errors.Join(store.ErrTxAborted, err)
		}
	}
	return err
}
