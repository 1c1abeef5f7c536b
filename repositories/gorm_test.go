package repositories_test

import (
	"context"
	"database/sql"
	"testing"

	"gorm.io/gorm"
)

// gormPayments is a GORM repository whose statements join the request's
// transaction when there is one.
type gormPayments struct {
	gorm *gorm.DB
	db   func(ctx context.Context) DBTX
}

// session is a GORM session on the request's transaction (the store's
// DB), else on the pool: GORM takes any ConnPool, and this is how its own
// Transaction sets one.
func (r gormPayments) session(ctx context.Context) *gorm.DB {
	s := r.gorm.Session(&gorm.Session{NewDB: true, Context: ctx})
	s.Statement.ConnPool = r.db(ctx)
	return s
}

func (r gormPayments) Create(ctx context.Context, p Payment) (int64, error) {
	err := r.session(ctx).Create(&p).Error
	return p.ID, err
}

func (r gormPayments) Get(ctx context.Context, id int64) (Payment, error) {
	var p Payment
	err := r.session(ctx).First(&p, id).Error
	return p, err
}

func TestGORM(t *testing.T) {
	t.Parallel()
	runRepository(t, func(t *testing.T, b backend, db *sql.DB) repository {
		return gormPayments{gorm: newGorm(t, b, db), db: func(ctx context.Context) DBTX { return b.ambient(ctx, db) }}
	})
}
