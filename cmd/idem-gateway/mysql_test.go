//go:build mysql

package main_test

// Built with -tags mysql (make test-mysql), the keys commands' test runs
// on MySQL or MariaDB too: MYSQL_URL's server (mysqltest), a database of
// its own. No server is a failure, never a skip.

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/mysqlstore/mysqltest"
	"github.com/idem-dev/idem/store"
)

func init() {
	keyDBs["MySQL"] = keyDB{
		new: mysqltest.NewDatabase,
		audit: func(t *testing.T, db string) store.Store {
			sdb, err := mysqlstore.Open(db)
			require.NoError(t, err)
			t.Cleanup(func() { _ = sdb.Close() })
			s, err := mysqlstore.New(sdb, mysqlstore.Config{})
			require.NoError(t, err)
			return s
		},
	}
}
