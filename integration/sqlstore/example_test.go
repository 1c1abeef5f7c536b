package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/sqlstore"
)

// The repository below is written by hand in the shape sqlc generates for
// database/sql (emit_interface off): a DBTX interface, New and a method
// per query. Handing it sqlstore.DB(ctx, db) makes its writes part of the
// request's transaction.

// DBTX is sqlc's generated interface.
type DBTX interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	PrepareContext(context.Context, string) (*sql.Stmt, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// Queries is sqlc's generated query set.
type Queries struct{ db DBTX }

// NewQueries is sqlc's generated New.
func NewQueries(db DBTX) *Queries { return &Queries{db: db} }

const createPayment = `-- name: CreatePayment :one
INSERT INTO payments (amount_cents) VALUES ($1) RETURNING id`

// CreatePayment is sqlc's generated method for the query above.
func (q *Queries) CreatePayment(ctx context.Context, amountCents int64) (int64, error) {
	row := q.db.QueryRowContext(ctx, createPayment, amountCents)
	var id int64
	err := row.Scan(&id)
	return id, err
}

// An sqlc-style repository on PostgreSQL through pgx's database/sql driver,
// in atomic mode: the payment and the key commit together, or neither
// does. A retry replays the first response; a request whose handler fails
// after writing leaves no payment behind.
func Example_sqlc() {
	ctx := context.Background()
	db, cleanup := exampleDB(ctx)
	defer cleanup()
	runPayments(ctx, db, func(ctx context.Context) (int64, error) {
		return NewQueries(sqlstore.DB(ctx, db)).CreatePayment(ctx, 100)
	})
	// Output:
	// 201 {"id":1} replayed: false
	// 201 {"id":1} replayed: true
	// 503 bank unavailable replayed: false
	// payments: 1
	// order-2 recorded: false
}

// runPayments serves POST /v1/payments in atomic mode with create as the
// handler's write, sends three requests (a payment, its retry, and one
// that fails after writing) and prints what the client and the database
// see.
func runPayments(ctx context.Context, db *sql.DB, create func(ctx context.Context) (int64, error)) {
	if _, err := sqlstore.Migrate(ctx, db, sqlstore.Config{}); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, amount_cents bigint NOT NULL)`); err != nil {
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
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := create(r.Context())
		if err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		if r.URL.Query().Get("fail") != "" {
			// The payment row is written, but the request fails: it
			// must not commit.
			http.Error(w, "bank unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw.Require(pay).ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
	}))
	defer srv.Close()

	post := func(key, query string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments"+query, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	post("order-1", "")
	post("order-1", "")
	post("order-2", "?fail=1")

	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments:", n)
	_, err = st.Get(ctx, "alice", "order-2")
	fmt.Println("order-2 recorded:", err == nil)
}

// exampleDB opens pgx's database/sql driver (registered as "pgx") on a
// fresh schema of the test database, and returns a function that drops it.
func exampleDB(ctx context.Context) (*sql.DB, func()) {
	admin, err := sql.Open("pgx", pgtest.URL())
	if err != nil {
		log.Fatal(err)
	}
	schema := "example_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		log.Fatalf("no PostgreSQL at DATABASE_URL (%v): run the tests with make test", err)
	}
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		log.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		log.Fatal(err)
	}
	return db, func() {
		db.Close()
		_, _ = admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	}
}
