package idem_test

import (
	"testing"

	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// The middleware's behaviour, in every configuration, on the in-memory
// reference store: the request path tests itself without a database. The
// SQL stores run the same half of storetest, and the store contract too.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	storetest.RunBehaviour(t, func(*testing.T) store.Store { return memstore.New() })
}
