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
			q.Set("max_conns", "4") // many servers share the server's max_connections
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
			pool.SetMaxOpenConns(1)
			return pool
		},
		idemStore: func(t *testing.T, db *sql.DB) store.Store {
			s, err := mysqlstore.New(db, mysqlstore.Config{})
			require.NoError(t, err)
			return s
		},
		// The statements running a balance's locking read: the test holds
		// the row, so they wait. (innodb_trx may say RUNNING of a read
		// that waits in the optimizer's lookup of a unique key.)
		lockWaiters: func(t *testing.T, db *sql.DB) int {
			var n int
			require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.processlist
			   WHERE db = DATABASE() AND id <> CONNECTION_ID() AND info LIKE 'SELECT %FROM balances WHERE %FOR UPDATE'`).Scan(&n))
			return n
		},
	}
}
