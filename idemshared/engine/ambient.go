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

// ambient is the request's transaction as a handler sees it: the *sql.Tx's
// statements, but no Commit or Rollback, which belong to the middleware.
type ambient struct{ t *Tx }

var _ DBTX = ambient{}

// DB returns the request's ambient transaction (Tx.Context) when ctx
// carries one, else fallback.
func DB(ctx context.Context, fallback DBTX) DBTX {
	if a, ok := Ambient[ambient](ctx); ok {
		return a
	}
	return fallback
}

// noted records that a statement of the handler failed.
func (a ambient) noted(err error) error {
	if err != nil {
		a.t.failed = true
		a.t.wrote = true
	}
	return err
}

func (a ambient) tx(ctx context.Context) (*sql.Tx, error) {
	tx, err := a.t.begin(ctx)
	a.t.wrote = true
	return tx, err
}

func (a ambient) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tx, err := a.tx(ctx)
	if err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, query, args...)
	return res, a.noted(err)
}

// PrepareContext prepares a statement on the transaction; it is closed
// with the transaction.
func (a ambient) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	tx, err := a.tx(ctx)
	if err != nil {
		return nil, err
	}
	st, err := tx.PrepareContext(ctx, query)
	return st, a.noted(err)
}

func (a ambient) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	tx, err := a.tx(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	return rows, a.noted(err)
}

func (a ambient) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	tx, err := a.tx(ctx)
	if err != nil {
		return sqlrow.Err(a.t.e.db, err)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// ambientKey is the context key of a store's request transaction as its
// handler sees it, one per type.
type ambientKey[T any] struct{}

// WithAmbient returns a copy of ctx carrying a, a store's request
// transaction as its handler sees it.
func WithAmbient[T any](ctx context.Context, a T) context.Context {
	return context.WithValue(ctx, ambientKey[T]{}, a)
}

// Ambient returns the request transaction of type T that ctx carries.
func Ambient[T any](ctx context.Context) (T, bool) {
	a, ok := ctx.Value(ambientKey[T]{}).(T)
	return a, ok
}
