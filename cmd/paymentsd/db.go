package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/cmd/internal/roundtrip"
	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/mysqlledger"
	"github.com/idem-dev/idem/payments/pgledger"
	"github.com/idem-dev/idem/payments/sqliteledger"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

// defaultDB is the embedded database a new user gets: nothing to install.
const defaultDB = "paymentsd.db"

// defaultPoolConns is the PostgreSQL pool size unless the URL sets
// pool_max_conns: pgxpool's own default (the number of CPUs, at least 4)
// is small for requests that hold a connection while they wait for a
// duplicate. It is the MySQL pool's size too, unless the URL sets
// max_conns: database/sql's own default has no bound at all.
const defaultPoolConns = 20

// connectTimeout bounds opening the database at start.
const connectTimeout = 10 * time.Second

// backend is one database: the key store and the wallet's ledger on it.
type backend struct {
	kind    string // "sqlite", "postgres" or "mysql"
	display string // where it is, without a password
	store   store.Store
	ledger  payments.Ledger
	// trips counts the round trips to PostgreSQL (nil for SQLite): the
	// cost per request make bench reports, on /metrics.
	trips *roundtrip.Counter
	// migrate applies the key table's and the wallet's pending migrations
	// and describes what it did.
	migrate func(ctx context.Context) (string, error)
	// durability reads whether a committed key could be lost on a crash or
	// a failover (pgstore.CheckDurability); nil where not checked.
	durability func(ctx context.Context) (pgstore.Durability, error)
	close      func()
}

func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

func isMySQLURL(db string) bool { return strings.HasPrefix(db, "mysql://") }

// openBackend opens db and checks that it answers.
func openBackend(ctx context.Context, db string) (*backend, error) {
	switch {
	case isPostgresURL(db):
		return openPostgres(ctx, db)
	case isMySQLURL(db):
		return openMySQL(ctx, db)
	}
	return openSQLite(db)
}

func openPostgres(ctx context.Context, dsn string) (*backend, error) {
	display := redact(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL %s: %v", display, err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultPoolConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	trips := &roundtrip.Counter{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %s", display, distinctLines(err))
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %s", display, distinctLines(err))
	}
	return &backend{
		kind: "postgres", display: display, trips: trips,
		store: pgstore.New(pool), ledger: pgledger.New(pool),
		migrate: func(ctx context.Context) (string, error) {
			keys, err := pgstore.Migrate(ctx, pool)
			if err != nil {
				return "", err
			}
			wallet, err := pgledger.Migrate(ctx, pool)
			return describeMigrations(keys, wallet), err
		},
		durability: func(ctx context.Context) (pgstore.Durability, error) { return pgstore.CheckDurability(ctx, pool) },
		close:      pool.Close,
	}, nil
}

// openMySQL opens a mysql://user:password@host:port/db URL (the query is
// go-sql-driver/mysql's parameters, plus max_conns, the pool's size).
func openMySQL(ctx context.Context, dsn string) (*backend, error) {
	display := redact(dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("MySQL URL %s: %v", display, err)
	}
	conns := defaultPoolConns
	q := u.Query()
	if v := q.Get("max_conns"); v != "" {
		if conns, err = strconv.Atoi(v); err != nil || conns < 1 {
			return nil, fmt.Errorf("MySQL URL %s: max_conns=%q is not a positive number", display, v)
		}
		q.Del("max_conns")
		u.RawQuery = q.Encode()
	}
	if strings.TrimPrefix(u.Path, "/") == "" {
		return nil, fmt.Errorf("MySQL URL %s names no database: add one, such as mysql://user@host:3306/payments", display)
	}
	cfg, err := mysqlstore.ParseDSN(u.String())
	if err != nil {
		return nil, fmt.Errorf("MySQL URL %s: %v", display, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = connectTimeout
	}
	db, err := mysqlstore.Open(cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("MySQL URL %s: %v", display, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to MySQL at %s: %v", display, err)
	}
	st, err := mysqlstore.New(db, mysqlstore.Config{})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &backend{
		kind: "mysql", display: display,
		store: st, ledger: mysqlledger.New(db),
		migrate: func(ctx context.Context) (string, error) {
			keys, err := mysqlstore.Migrate(ctx, db, mysqlstore.Config{})
			if err != nil {
				return "", err
			}
			wallet, err := mysqlledger.Migrate(ctx, db)
			return describeMigrations(keys, wallet), err
		},
		close: func() { _ = db.Close() },
	}, nil
}

func openSQLite(path string) (*backend, error) {
	db, err := sqlitestore.Open(path)
	if err != nil {
		return nil, err
	}
	return &backend{
		kind: "sqlite", display: path,
		store: sqlitestore.New(db), ledger: sqliteledger.New(db),
		migrate: func(ctx context.Context) (string, error) {
			keys, err := sqlitestore.Migrate(ctx, db)
			if err != nil {
				return "", err
			}
			wallet, err := sqliteledger.Migrate(ctx, db)
			return describeMigrations(keys, wallet), err
		},
		close: func() { _ = db.Close() },
	}, nil
}

func describeMigrations(keys, wallet []int) string {
	if len(keys) == 0 && len(wallet) == 0 {
		return "schema is up to date"
	}
	return fmt.Sprintf("applied migrations: idempotency keys %v, wallet %v", keys, wallet)
}

// distinctLines is err's text with each line once: pgx reports one line
// per connection attempt, and with sslmode=prefer it tries each address
// twice, with TLS and without, failing the same way.
func distinctLines(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return strings.Join(out, " ")
}

// redact hides the password of a database URL.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
