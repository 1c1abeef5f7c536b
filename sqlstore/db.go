package sqlstore

import (
	"context"

	"github.com/idem-dev/idem/idemshared/engine"
)

// DBTX is what a repository needs of a database through database/sql:
// sqlc's generated DBTX interface and GORM's ConnPool (ExecContext,
// PrepareContext, QueryContext, QueryRowContext). *sql.DB, *sql.Conn and
// *sql.Tx all satisfy it, and so does what DB returns.
type DBTX = engine.DBTX

// DB returns the request's ambient transaction when ctx carries one (an
// idempotent request), else fallback (usually the *sql.DB). Repositories
// call it for every unit of work, so their writes commit together with the
// request's idempotency key:
//
//	_, err := sqlstore.DB(ctx, r.db).ExecContext(ctx, "INSERT INTO payments …")
//
// The transaction is a *sql.Tx at READ COMMITTED, begun at the first
// statement. Never run COMMIT or ROLLBACK in it: the middleware commits
// the key with it. In PostgreSQL a failed statement aborts the transaction
// (use SAVEPOINT and ROLLBACK TO around a statement that may fail); in
// MySQL it fails alone.
func DB(ctx context.Context, fallback DBTX) DBTX { return engine.DB(ctx, fallback) }
