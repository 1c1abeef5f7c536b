package repositories_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/sqlstore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// Payment is the row every repository writes: sqlx reads its db tags,
// GORM its field names.
type Payment struct {
	ID          int64  `db:"id" json:"id"`
	AmountCents int64  `db:"amount_cents" json:"amount_cents"`
	Reference   string `db:"reference" json:"reference"`
}

// repository is what the handler needs of a payments repository.
type repository interface {
	Create(ctx context.Context, p Payment) (int64, error)
	Get(ctx context.Context, id int64) (Payment, error)
}

// backend is a database the stores run on.
type backend struct {
	name string
	// open returns a migrated store on a database of its own, with a
	// payments table.
	open func(t *testing.T) (store.Store, *sql.DB)
	// ambient is the store's DB: the request's transaction when ctx
	// carries one, else db.
	ambient func(ctx context.Context, db *sql.DB) sqlstore.DBTX
	// gorm is GORM's dialector on an open connection pool.
	gorm func(conn gorm.ConnPool) gorm.Dialector
}

// The SQL the repositories run is the same on both databases: SQLite
// (modernc.org/sqlite) reads $1 as the first argument, and has RETURNING.
const (
	postgresPayments = `CREATE TABLE payments (id bigserial PRIMARY KEY, amount_cents bigint NOT NULL, reference text NOT NULL)`
	sqlitePayments   = `CREATE TABLE payments (id INTEGER PRIMARY KEY, amount_cents INTEGER NOT NULL, reference TEXT NOT NULL)`
)

func backends() []backend {
	pg := func(ctx context.Context, db *sql.DB) sqlstore.DBTX { return sqlstore.DB(ctx, db) }
	pgGorm := func(conn gorm.ConnPool) gorm.Dialector { return postgres.New(postgres.Config{Conn: conn}) }
	return []backend{
		{name: "LibPQ", open: func(t *testing.T) (store.Store, *sql.DB) { return openPostgres(t, "postgres", 4) }, ambient: pg, gorm: pgGorm},
		{name: "PgxStdlib", open: func(t *testing.T) (store.Store, *sql.DB) { return openPostgres(t, "pgx", 4) }, ambient: pg, gorm: pgGorm},
		{
			name: "SQLite",
			open: openSQLite,
			ambient: func(ctx context.Context, db *sql.DB) sqlstore.DBTX {
				return sqlitestore.DB(ctx, db)
			},
			gorm: func(conn gorm.ConnPool) gorm.Dialector { return sqlite.New(sqlite.Config{Conn: conn}) },
		},
	}
}

// openPostgres opens driver ("postgres" is lib/pq, "pgx" pgx's stdlib) on
// a fresh schema, with at most conns connections, and migrates sqlstore's
// key table and a payments table there.
func openPostgres(t *testing.T, driver string, conns int) (*sqlstore.Store, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open(driver, pgtest.SchemaURL(t, pgtest.Schema(t)))
	require.NoError(t, err)
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { db.Close() })
	_, err = sqlstore.Migrate(ctx, db, sqlstore.Config{})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, postgresPayments)
	require.NoError(t, err)
	st, err := sqlstore.New(db, sqlstore.Config{})
	require.NoError(t, err)
	return st, db
}

func openSQLite(t *testing.T) (store.Store, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitestore.Open(filepath.Join(t.TempDir(), "payments.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = sqlitestore.Migrate(ctx, db)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, sqlitePayments)
	require.NoError(t, err)
	return sqlitestore.New(db), db
}

// runRepository runs newRepo's repository on every backend, in every
// configuration of the middleware storetest drives, behind a real HTTP
// server. Its handler creates a payment, reads it back through the
// repository (a read outside the request's transaction would not see it)
// and answers with it, or with 503 after writing when the request says
// X-Fail. A retry is replayed and writes nothing; the failed request's
// payment rolls back with its key, so its retry runs afresh and the table
// holds exactly one payment per key.
func runRepository(t *testing.T, newRepo func(t *testing.T, b backend, db *sql.DB) repository) {
	for _, b := range backends() {
		for _, c := range storetest.MiddlewareConfigs() {
			t.Run(b.name+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st, db := b.open(t)
				if c.Config.Mode == idem.ModeAtomicDeferred && !st.Capabilities().DeferredClaim {
					t.Skipf("%s cannot defer a claim", b.name)
				}
				repo := newRepo(t, b, db)
				mw, err := idem.New(st, c.Config)
				require.NoError(t, err)
				pay := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ctx := r.Context()
					id, err := repo.Create(ctx, Payment{AmountCents: 100, Reference: r.Header.Get("Idempotency-Key")})
					if err != nil {
						http.Error(w, "create: "+err.Error(), http.StatusInternalServerError)
						return
					}
					p, err := repo.Get(ctx, id)
					if err != nil {
						http.Error(w, "read back: "+err.Error(), http.StatusInternalServerError)
						return
					}
					if r.Header.Get("X-Fail") != "" {
						http.Error(w, "bank unavailable", http.StatusServiceUnavailable)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusCreated)
					_ = json.NewEncoder(w).Encode(p)
				}))
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					pay.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
				}))
				t.Cleanup(srv.Close)
				post := func(key string, fail bool) (int, string, bool) {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount_cents":100}`))
					require.NoError(t, err)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", key)
					if fail {
						req.Header.Set("X-Fail", "1")
					}
					resp, err := http.DefaultClient.Do(req)
					require.NoError(t, err)
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					return resp.StatusCode, strings.TrimSpace(string(body)), resp.Header.Get("Idempotent-Replayed") == "true"
				}
				references := func() []string {
					rows, err := db.QueryContext(ctx, `SELECT reference FROM payments ORDER BY id`)
					require.NoError(t, err)
					defer rows.Close()
					var refs []string
					for rows.Next() {
						var ref string
						require.NoError(t, rows.Scan(&ref))
						refs = append(refs, ref)
					}
					require.NoError(t, rows.Err())
					return refs
				}

				code, first, replayed := post("k1", false)
				require.Equal(t, http.StatusCreated, code, first)
				require.False(t, replayed)
				require.Equal(t, `{"id":1,"amount_cents":100,"reference":"k1"}`, first)
				code, again, replayed := post("k1", false)
				require.Equal(t, http.StatusCreated, code, again)
				require.True(t, replayed)
				require.Equal(t, first, again)

				code, body, _ := post("k2", true)
				require.Equal(t, http.StatusServiceUnavailable, code, body)
				require.Equal(t, []string{"k1"}, references(), "the failed request's payment rolled back")
				code, body, replayed = post("k2", false)
				require.Equal(t, http.StatusCreated, code, body)
				require.False(t, replayed, "the key was released with the rollback")
				require.Equal(t, []string{"k1", "k2"}, references())
			})
		}
	}
}

// newGorm opens GORM on b's database. Each write is one statement of the
// request's transaction, not a transaction of its own.
func newGorm(t *testing.T, b backend, db *sql.DB) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(b.gorm(db), &gorm.Config{SkipDefaultTransaction: true})
	require.NoError(t, err)
	return g
}
