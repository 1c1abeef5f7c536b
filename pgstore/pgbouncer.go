package pgstore

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PgBouncerConfig adapts cfg to a connection pooler in transaction pooling
// mode, such as PgBouncer before 1.21: it sets pgx's
// QueryExecModeCacheDescribe (default_query_exec_mode=cache_describe in a
// connection string), so no statement depends on a server connection's
// named prepared statements. The rest of the store is pooler-safe as it
// is. docs/operations.md (PgBouncer) says why, and what the pool and the
// application's own statements must avoid.
//
//	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
//	pgstore.PgBouncerConfig(cfg)
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
func PgBouncerConfig(cfg *pgxpool.Config) {
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
}
