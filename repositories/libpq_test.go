package repositories_test

import (
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// sqlstore on lib/pq passes the suite every store passes: claims, replays,
// races, waits bounded by lock_timeout (lib/pq's errors carry the
// SQLSTATE too), leases, the sweep. Like sqlstore's own test pools it has
// fewer connections than the suite's 64 racers.
func TestConformanceLibPQ(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		st, _ := openPostgres(t, "postgres", 24)
		return st
	})
}
