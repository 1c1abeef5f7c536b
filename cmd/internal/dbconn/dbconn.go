// Package dbconn opens the PostgreSQL and MySQL databases a dburl.DB
// names, with the pool sizes and timeouts every server of the repository
// uses, and checks that they answer. Its errors name the database without
// its credentials.
package dbconn

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/mysqlstore"
)

// DefaultPoolConns is the pool size unless the URL sets pool_max_conns
// (PostgreSQL) or max_conns (MySQL): pgxpool's own default (the number of
// CPUs, at least 4) is small for requests that hold a connection while
// they wait for a duplicate, and database/sql's has no bound at all.
const DefaultPoolConns = 20

// ConnectTimeout bounds opening the database at start.
const ConnectTimeout = 10 * time.Second

// Postgres opens a pool on db, a PostgreSQL URL; tracer, if not nil,
// traces its connections.
func Postgres(ctx context.Context, db dburl.DB, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	display := db.String()
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL %s: %s", display, dburl.Scrub(err.Error(), db.DSN))
	}
	if !strings.Contains(db.DSN, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %s", display, distinctLines(err, db.DSN))
	}
	pctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %s", display, distinctLines(err, db.DSN))
	}
	return pool, nil
}

// MySQL opens db, a mysql:// URL or a go-sql-driver/mysql DSN (its query
// is the driver's parameters, plus max_conns, the pool's size).
func MySQL(ctx context.Context, db dburl.DB) (*sql.DB, error) {
	display := db.String()
	cfg, err := mysqlstore.ParseDSN(db.DSN)
	if err != nil {
		return nil, fmt.Errorf("MySQL database %s: %s", display, dburl.Scrub(err.Error(), db.DSN))
	}
	conns := DefaultPoolConns
	if v, ok := cfg.Params["max_conns"]; ok {
		if conns, err = strconv.Atoi(v); err != nil || conns < 1 {
			return nil, fmt.Errorf("MySQL database %s: max_conns=%q is not a positive number", display, v)
		}
		delete(cfg.Params, "max_conns")
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("MySQL database %s names no database: add one, such as mysql://user@host:3306/payments", display)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = ConnectTimeout
	}
	sdb, err := mysqlstore.Open(cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("MySQL database %s: %s", display, dburl.Scrub(err.Error(), db.DSN))
	}
	sdb.SetMaxOpenConns(conns)
	sdb.SetMaxIdleConns(conns)
	pctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	if err := sdb.PingContext(pctx); err != nil {
		_ = sdb.Close()
		return nil, fmt.Errorf("connect to MySQL at %s: %s", display, dburl.Scrub(err.Error(), db.DSN))
	}
	return sdb, nil
}

// distinctLines is err's text with each line once, scrubbed of dsn: pgx reports
// one line per connection attempt, and with sslmode=prefer it tries each
// address twice, with TLS and without, failing the same way.
func distinctLines(err error, dsn string) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return dburl.Scrub(strings.Join(out, " "), dsn)
}
