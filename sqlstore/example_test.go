package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/sqlstore"
)

// A payments API on PostgreSQL through database/sql, in atomic mode: the
// handler's insert runs in the request's transaction, through
// sqlstore.DB, so the payment and the key's stored response commit
// together, or neither does. The driver is the application's choice: here
// pgx's, registered as "pgx" by importing github.com/jackc/pgx/v5/stdlib
// (lib/pq's is "postgres"). An sqlc repository takes sqlstore.DB(ctx, db)
// as its DBTX, GORM as its ConnPool. (Compiled, not run: the module
// requires no driver. Module integration runs it on PostgreSQL:
// integration/sqlstore.Example_sqlc.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlstore.Migrate(ctx, db, sqlstore.Config{}); err != nil {
		log.Fatal(err)
	}
	st, err := sqlstore.New(db, sqlstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idem.New(st, idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}

	pay := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var id int64
		err := sqlstore.DB(ctx, db).QueryRowContext(ctx, `INSERT INTO payments (amount_cents) VALUES (100) RETURNING id`).Scan(&id)
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // rolled back, the key released
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	}))
	http.Handle("POST /v1/payments", authenticate(pay))
	log.Fatal(http.ListenAndServe(":8080", nil))
}

// authenticate says whose request it is: every key is scoped by its user.
// A real one checks a credential; this one trusts a header.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), r.Header.Get("X-User"))))
	})
}
