package engine

import (
	"context"
	"database/sql"

	"github.com/idem-dev/idem/idemshared/sqlrow"
)

// DBTX is what a repository needs of a database through database/sql:
// sqlc's generated DBTX interface and GORM's ConnPool. *sql.DB, *sql.Conn
// and *sql.Tx all satisfy it, and so does what DB returns.
type DBTX interface {
	SQLQuerier
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// RequestTx is a store's request transaction as its handler's statements
// use it: Conn begins it if it has not begun and returns where the
// statements run, Explain says why one failed, and DB is the store's
// *sql.DB, for the row of a transaction that failed to begin.
type RequestTx interface {
	Conn(ctx context.Context) (DBTX, error)
	Explain(err error) error
	DB() *sql.DB
}

// Handle is a store's request transaction as a handler sees it: its
// statements, but no Commit or Rollback, which belong to the middleware.
type Handle[T RequestTx] struct{ t T }

// handleKey is the context key of a Handle[T], one per store.
type handleKey[T RequestTx] struct{}

// WithHandle returns a copy of ctx carrying t for HandleDB: a store's
// Tx.Context.
func WithHandle[T RequestTx](ctx context.Context, t T) context.Context {
	return context.WithValue(ctx, handleKey[T]{}, Handle[T]{t})
}

// HandleDB returns the Handle[T] ctx carries, else fallback: a store's DB.
func HandleDB[T RequestTx](ctx context.Context, fallback DBTX) DBTX {
	if h, ok := ctx.Value(handleKey[T]{}).(Handle[T]); ok {
		return h
	}
	return fallback
}

func (h Handle[T]) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c, err := h.t.Conn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.ExecContext(ctx, query, args...)
	return res, h.t.Explain(err)
}

// PrepareContext prepares a statement in the transaction; close it before
// the request ends.
func (h Handle[T]) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	c, err := h.t.Conn(ctx)
	if err != nil {
		return nil, err
	}
	st, err := c.PrepareContext(ctx, query)
	return st, h.t.Explain(err)
}

func (h Handle[T]) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c, err := h.t.Conn(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryContext(ctx, query, args...)
	return rows, h.t.Explain(err)
}

func (h Handle[T]) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c, err := h.t.Conn(ctx)
	if err != nil {
		return sqlrow.Err(h.t.DB(), err)
	}
	return c.QueryRowContext(ctx, query, args...)
}

// handlerTx is a Tx as the RequestTx of its handler's statements, any of
// which may write: a failed one is noted.
type handlerTx struct{ t *Tx }

var _ DBTX = Handle[handlerTx]{}

// DB returns the request's ambient transaction (Tx.Context) when ctx
// carries one, else fallback.
func DB(ctx context.Context, fallback DBTX) DBTX { return HandleDB[handlerTx](ctx, fallback) }

func (h handlerTx) Conn(ctx context.Context) (DBTX, error) {
	tx, err := h.t.begin(ctx)
	h.t.wrote = true
	if err != nil {
		return nil, err
	}
	return tx, nil
}

func (h handlerTx) Explain(err error) error {
	if err != nil {
		h.t.failed, h.t.wrote = true, true
	}
	return err
}

func (h handlerTx) DB() *sql.DB { return h.t.e.db }
