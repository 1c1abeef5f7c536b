package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/sqlrow"
)

// DBTX is what a repository needs of SQLite: sqlc's generated DBTX
// interface and GORM's ConnPool (ExecContext, PrepareContext,
// QueryContext, QueryRowContext). *sql.DB, *sql.Conn and *sql.Tx all
// satisfy it, and so does what DB returns.
type DBTX = engine.DBTX

// ambient is the request's transaction as a handler sees it: statements,
// but no Commit or Rollback, which belong to the middleware.
type ambient struct{ t *writeTx }

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
	if a, ok := engine.Ambient[ambient](ctx); ok {
		return a
	}
	return fallback
}

func (a ambient) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c, err := a.t.begin(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.ExecContext(ctx, query, args...)
	return res, a.t.explain(err)
}

// PrepareContext prepares a statement on the transaction's connection;
// close it before the request ends.
func (a ambient) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	c, err := a.t.begin(ctx)
	if err != nil {
		return nil, err
	}
	st, err := c.PrepareContext(ctx, query)
	return st, a.t.explain(err)
}

func (a ambient) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c, err := a.t.begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryContext(ctx, query, args...)
	return rows, a.t.explain(err)
}

func (a ambient) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c, err := a.t.begin(ctx)
	if err != nil {
		return sqlrow.Err(a.t.s.DB(), err)
	}
	return c.QueryRowContext(ctx, query, args...)
}
