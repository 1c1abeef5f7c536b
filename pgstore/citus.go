package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/pgstore/pgmigrate"
)

// DistributeConfig configures Distribute.
type DistributeConfig struct {
	// Table is the key table's name (Config.Table). Default
	// "idempotency_keys".
	Table string

	// ColocateWith is a table distributed by a text user column whose
	// shards the key table's are placed with (paymentsd: the wallet's
	// users), so that a transaction over one user's key and rows of that
	// table commits on one node. Default: Citus's default group for text.
	ColocateWith string
}

// Distribute distributes a migrated key table on a Citus coordinator
// (docs/operations.md, "Running on Citus"): the table by scope, every
// statement a request runs reaching one shard, and its audit log of
// operators' actions a reference table, since an operator lists it
// across users, newest first, by its one sequence. It returns the tables
// it distributed; those Citus already distributes are left alone, so it
// may run on every deploy. It fails with pgmigrate.ErrNoCitus on a
// database without the citus extension.
func Distribute(ctx context.Context, pool *pgxpool.Pool, opts DistributeConfig) ([]string, error) {
	table, err := keytable.Check(opts.Table)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return pgmigrate.Distribute(ctx, pool, []pgmigrate.Distribution{
		{Table: table, Column: "scope", ColocateWith: opts.ColocateWith},
		{Table: table + "_audit"},
	})
}
