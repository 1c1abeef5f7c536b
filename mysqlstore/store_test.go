package mysqlstore_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"

	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/mysqlstore/mysqltest"
)

func newStore(t *testing.T) store.Store {
	db, opts := mysqltest.Store(t)
	s, err := mysqlstore.New(db, opts)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, newStore)
}
