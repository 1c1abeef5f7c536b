package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"

	"github.com/idem-dev/idem/sqlstore"
)

// openDB opens pgx's database/sql driver on a fresh schema. Like pgstore's
// test pools it has fewer connections than the suite's 64 racers, so that
// many tests in parallel stay within the server's max_connections.
func openDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.SchemaURL(t, pgtest.Schema(t)))
	require.NoError(t, err)
	db.SetMaxOpenConns(24)
	t.Cleanup(func() { db.Close() })
	return db
}

// newStore returns a migrated store on a fresh schema, with opts.
func newStore(t *testing.T, opts sqlstore.Config) (*sqlstore.Store, *sql.DB) {
	t.Helper()
	db := openDB(t)
	_, err := sqlstore.Migrate(context.Background(), db, opts)
	require.NoError(t, err)
	s, err := sqlstore.New(db, opts)
	require.NoError(t, err)
	return s, db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t, sqlstore.Config{})
		return s
	})
}

func TestConformanceOtherTable(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t, sqlstore.Config{Table: "request_keys"})
		return s
	})
}
