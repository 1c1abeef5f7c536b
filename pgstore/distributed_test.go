package pgstore

import (
	"reflect"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

// fanOuts are the store's statements that reach every shard of a key
// table distributed by user, each named in docs/operations.md ("Running on
// Citus") with how often it runs. No statement a request runs is here.
var fanOuts = map[string]bool{
	"deleteExpired":   true, // the sweeper, per partition
	"sweepCandidates": true, // the sweeper, on a key table Citus distributes
	"findUnfinished":  true, // the completer's scan
	"listCompleted":   true, // an operator's list
}

// shardBound are statements that name several users, all on one shard by
// construction: the statement check cannot tell, Citus can.
var shardBound = map[string]bool{
	"sweepShard": true, // sweepShards groups its keys by shard
}

// Every statement of the store names its user, so that a key table
// distributed by user (Citus) or hash-partitioned by it sends it to one
// shard, and bounds its waits with SET LOCAL, which Citus passes on.
func TestStatementsRoutedByUser(t *testing.T) {
	t.Parallel()
	sql := map[string]string{
		"sweepLock":       sweepLock,
		"sweepLockWait":   sweepLockWait,
		"deleteExpired":   deleteExpired,
		"sweepCandidates": sweepCandidates,
		"sweepShard":      sweepShard,
		"citusInstalled":  citusInstalled,
		"keysDistributed": keysDistributed,
		"LockWait":        pgsql.LockWait(time.Second),
		"RestoreLockWait": pgsql.RestoreLockWait,
		"lockKey":         lockKey,
	}
	v := reflect.ValueOf(*newStatements(keytable.Default))
	for i := range v.NumField() {
		sql[v.Type().Field(i).Name] = v.Field(i).String()
	}
	for name, s := range sql {
		problem := pgtest.StatementViolation(s)
		if fanOuts[name] || shardBound[name] {
			require.NotEmpty(t, problem, "%s is listed as a fan-out but names its user", name)
			continue
		}
		require.Empty(t, problem, "%s: %s", name, s)
	}
}
