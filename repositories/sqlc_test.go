package repositories_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
)

// DBTX, Queries and their methods are written by hand in the shape sqlc
// generates for database/sql with emit_prepared_queries: one query set
// works on any DBTX, and Prepare prepares its statements on one. Handing
// either sqlstore.DB(ctx, db) makes the queries part of the request's
// transaction.

// DBTX is sqlc's generated interface.
type DBTX interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	PrepareContext(context.Context, string) (*sql.Stmt, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// Queries is sqlc's generated query set.
type Queries struct {
	db                DBTX
	createPaymentStmt *sql.Stmt
	getPaymentStmt    *sql.Stmt
}

// New is sqlc's generated New.
func New(db DBTX) *Queries { return &Queries{db: db} }

// Prepare is sqlc's generated Prepare.
func Prepare(ctx context.Context, db DBTX) (*Queries, error) {
	q := Queries{db: db}
	var err error
	if q.createPaymentStmt, err = db.PrepareContext(ctx, createPayment); err != nil {
		return nil, errors.Join(err, q.Close())
	}
	if q.getPaymentStmt, err = db.PrepareContext(ctx, getPayment); err != nil {
		return nil, errors.Join(err, q.Close())
	}
	return &q, nil
}

// Close is sqlc's generated Close.
func (q *Queries) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{q.createPaymentStmt, q.getPaymentStmt} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func (q *Queries) queryRow(ctx context.Context, stmt *sql.Stmt, query string, args ...any) *sql.Row {
	if stmt != nil {
		return stmt.QueryRowContext(ctx, args...)
	}
	return q.db.QueryRowContext(ctx, query, args...)
}

const createPayment = `-- name: CreatePayment :one
INSERT INTO payments (amount_cents, reference) VALUES ($1, $2) RETURNING id`

// CreatePaymentParams is sqlc's generated parameter struct.
type CreatePaymentParams struct {
	AmountCents int64
	Reference   string
}

// CreatePayment is sqlc's generated method for the query above.
func (q *Queries) CreatePayment(ctx context.Context, arg CreatePaymentParams) (int64, error) {
	row := q.queryRow(ctx, q.createPaymentStmt, createPayment, arg.AmountCents, arg.Reference)
	var id int64
	err := row.Scan(&id)
	return id, err
}

const getPayment = `-- name: GetPayment :one
SELECT id, amount_cents, reference FROM payments WHERE id = $1`

// GetPayment is sqlc's generated method for the query above.
func (q *Queries) GetPayment(ctx context.Context, id int64) (Payment, error) {
	row := q.queryRow(ctx, q.getPaymentStmt, getPayment, id)
	var i Payment
	err := row.Scan(&i.ID, &i.AmountCents, &i.Reference)
	return i, err
}

// sqlcPayments is a repository on the generated code: each unit of work
// takes the request's transaction (else the pool) and, when prepared,
// prepares its statements there and closes them before it returns.
type sqlcPayments struct {
	db       func(ctx context.Context) DBTX
	prepared bool
}

func (r sqlcPayments) queries(ctx context.Context, fn func(q *Queries) error) error {
	if !r.prepared {
		return fn(New(r.db(ctx)))
	}
	q, err := Prepare(ctx, r.db(ctx))
	if err != nil {
		return err
	}
	return errors.Join(fn(q), q.Close())
}

func (r sqlcPayments) Create(ctx context.Context, p Payment) (id int64, err error) {
	err = r.queries(ctx, func(q *Queries) error {
		id, err = q.CreatePayment(ctx, CreatePaymentParams{AmountCents: p.AmountCents, Reference: p.Reference})
		return err
	})
	return id, err
}

func (r sqlcPayments) Get(ctx context.Context, id int64) (p Payment, err error) {
	err = r.queries(ctx, func(q *Queries) error {
		p, err = q.GetPayment(ctx, id)
		return err
	})
	return p, err
}

func TestSqlc(t *testing.T) {
	t.Parallel()
	for _, prepared := range []bool{false, true} {
		name := "Queries"
		if prepared {
			name = "Prepared"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runRepository(t, func(_ *testing.T, b backend, db *sql.DB) repository {
				return sqlcPayments{db: func(ctx context.Context) DBTX { return b.ambient(ctx, db) }, prepared: prepared}
			})
		})
	}
}
