//go:build mysql

package main_test

// Built with -tags mysql (make test-mysql), the tests that run on each
// store run on MySQL or MariaDB instead: MYSQL_URL's server (mysqltest),
// each paymentsd on a database of its own. No server is a failure, never
// a skip. SQLite and PostgreSQL are make test's; the few tests that name
// one still run, so PostgreSQL is needed here too.

import (
	"database/sql"
	"net/url"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/mysqlstore/mysqltest"
	"github.com/idem-dev/idem/store"
)

func init() {
	stores = []string{"mysql"}
	sqlStores["mysql"] = sqlStore{
		newDB: func(t *testing.T) string {
			u, err := url.Parse(mysqltest.NewDatabase(t))
			require.NoError(t, err)
			q := u.Query()
			q.Set("max_conns", "5") // many servers share the server's max_connections
			u.RawQuery = q.Encode()
			return u.String()
		},
		open: func(t *testing.T, db string) *sql.DB {
			u, err := url.Parse(db)
			require.NoError(t, err)
			q := u.Query()
			q.Del("max_conns") // paymentsd's, not the driver's
			u.RawQuery = q.Encode()
			pool, err := mysqlstore.Open(u.String())
			require.NoError(t, err)
			pool.SetMaxOpenConns(2)
			t.Cleanup(func() { _ = pool.Close() })
			return pool
		},
		idemStore: func(t *testing.T, db *sql.DB) store.Store {
			s, err := mysqlstore.New(db, mysqlstore.Options{})
			require.NoError(t, err)
			return s
		},
		lockWaiters: func(t *testing.T, db *sql.DB) int {
			var n int
			require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.innodb_trx t
			    JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
			   WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()`).Scan(&n))
			return n
		},
	}
}
