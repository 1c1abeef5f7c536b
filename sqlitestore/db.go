package sqlitestore

import (
	"context"

	"github.com/idem-dev/idem/idemshared/engine"
)

// DBTX is what a repository needs of SQLite: sqlc's generated DBTX
// interface and GORM's ConnPool (ExecContext, PrepareContext,
// QueryContext, QueryRowContext). *sql.DB, *sql.Conn and *sql.Tx all
// satisfy it, and so does what DB returns.
type DBTX = engine.DBTX

// DB returns the request's ambient transaction when ctx carries one (an
// idempotent request), else fallback (usually the *sql.DB). Repositories
// call it for every unit of work, so their writes commit together with the
// request's idempotency key:
//
//	_, err := sqlitestore.DB(ctx, r.db).ExecContext(ctx, "INSERT INTO payments …")
//
// The transaction takes the write lock at its first statement, a read
// included. A business error (a UNIQUE violation) fails only its statement;
// use SAVEPOINT to undo more. Never run COMMIT or ROLLBACK: either ends the
// transaction, and every later statement fails with store.ErrTxAborted.
func DB(ctx context.Context, fallback DBTX) DBTX {
	return engine.HandleDB[*writeTx](ctx, fallback)
}
