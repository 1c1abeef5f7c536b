package sqlstore_test

import (
	"context"
	"database/sql"
	"log"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/idem-dev/idem/sqlstore"
)

// Payment is a GORM model.
type Payment struct {
	ID          int64
	AmountCents int64
}

// PaymentRepo is a GORM repository whose writes join the request's
// transaction when there is one.
type PaymentRepo struct {
	gorm *gorm.DB
	db   *sql.DB
}

// session is a GORM session on the request's transaction (sqlstore.DB),
// else on the pool: GORM takes any ConnPool, and a transaction of its own
// is what GORM's Transaction sets the same way.
func (r PaymentRepo) session(ctx context.Context) *gorm.DB {
	s := r.gorm.Session(&gorm.Session{NewDB: true, Context: ctx})
	s.Statement.ConnPool = sqlstore.DB(ctx, r.db)
	return s
}

// Create records a payment.
func (r PaymentRepo) Create(ctx context.Context, amountCents int64) (int64, error) {
	p := Payment{AmountCents: amountCents}
	err := r.session(ctx).Create(&p).Error
	return p.ID, err
}

// A GORM repository on PostgreSQL through pgx's database/sql driver, in
// atomic mode: the payment and the key commit together, or neither does.
func Example_gorm() {
	ctx := context.Background()
	db, cleanup := exampleDB(ctx)
	defer cleanup()
	g, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{
		// Each Create is one statement of the request's transaction, not
		// a transaction of its own.
		SkipDefaultTransaction: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	repo := PaymentRepo{gorm: g, db: db}
	runPayments(ctx, db, func(ctx context.Context) (int64, error) { return repo.Create(ctx, 100) })
	// Output:
	// 201 {"id":1} replayed: false
	// 201 {"id":1} replayed: true
	// 503 bank unavailable replayed: false
	// payments: 1
	// order-2 recorded: false
}
