package pgstore

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PgBouncerConfig adapts cfg to a connection pooler in transaction pooling
// mode, such as PgBouncer before 1.21 (Debian 12 ships 1.18), which hands
// each transaction, or each statement outside one, to whichever server
// connection is free:
//
//	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
//	pgstore.PgBouncerConfig(cfg)
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//
// It sets pgx's QueryExecModeCacheDescribe, the connection-string
// parameter default_query_exec_mode=cache_describe: statements go as
// unnamed prepared statements, each in one round trip once pgx has cached
// their parameter and result types, never as the named statements of pgx's
// default mode, which exist only on the server connection that prepared
// them (through a pooler: "prepared statement … already exists", SQLSTATE
// 42P05). Types come from the server, so values encode as in the default
// mode. QueryExecModeExec and QueryExecModeSimpleProtocol, which guess
// types from Go values, work with the store too (its SQL casts what a guess
// would get wrong), but may not with the application's own statements.
//
// Everything else in the store is pooler-safe as it is: the lock_timeout
// it sets around a claim is set_config(…, true), local to the transaction
// (or the implicit transaction of one batch); the sweep lock and the
// migrations' lock are transaction-scoped advisory locks; nothing uses a
// session setting, a session advisory lock, LISTEN or a cursor held across
// transactions.
//
// The pooler keeps no per-client session, so the pool must not rely on
// startup parameters PgBouncer does not forward: it refuses search_path
// (put the key table in the role's or the database's default search_path:
// ALTER ROLE … SET search_path = …) and cannot forward
// default_transaction_isolation (the store asks for READ COMMITTED
// itself). Keep the application's own repositories to the same rules.
func PgBouncerConfig(cfg *pgxpool.Config) {
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
}
