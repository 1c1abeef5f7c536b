package repositories_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jmoiron/sqlx"
)

// sqlxPayments is an sqlx repository on the request's transaction. sqlx's
// GetContext and SelectContext take a QueryerContext, which only sqlx's own
// *DB, *Tx and *Conn satisfy (its *Row has no exported constructor), and
// the middleware keeps the transaction's Commit to itself: so the
// repository runs its statements on the store's DB and leaves the rest to
// sqlx's functions on plain database/sql values: Named for :name
// parameters, Rebind for the driver's placeholders, StructScan for rows.
type sqlxPayments struct {
	db func(ctx context.Context) DBTX
}

func (r sqlxPayments) Create(ctx context.Context, p Payment) (int64, error) {
	query, args, err := sqlx.Named(`INSERT INTO payments (amount_cents, reference) VALUES (:amount_cents, :reference) RETURNING id`, p)
	if err != nil {
		return 0, err
	}
	var id int64
	err = r.db(ctx).QueryRowContext(ctx, sqlx.Rebind(sqlx.DOLLAR, query), args...).Scan(&id)
	return id, err
}

func (r sqlxPayments) Get(ctx context.Context, id int64) (Payment, error) {
	query, args, err := sqlx.In(`SELECT id, amount_cents, reference FROM payments WHERE id IN (?)`, []int64{id})
	if err != nil {
		return Payment{}, err
	}
	rows, err := r.db(ctx).QueryContext(ctx, sqlx.Rebind(sqlx.DOLLAR, query), args...)
	if err != nil {
		return Payment{}, err
	}
	var found []Payment
	if err := sqlx.StructScan(rows, &found); err != nil { // closes rows
		return Payment{}, err
	}
	if len(found) != 1 {
		return Payment{}, sql.ErrNoRows
	}
	return found[0], nil
}

func TestSqlx(t *testing.T) {
	t.Parallel()
	runRepository(t, func(_ *testing.T, b backend, db *sql.DB) repository {
		return sqlxPayments{db: func(ctx context.Context) DBTX { return b.ambient(ctx, db) }}
	})
}
