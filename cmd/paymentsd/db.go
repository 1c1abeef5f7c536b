package main

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/cmd/internal/dbconn"
	"github.com/idem-dev/idem/cmd/internal/dburl"
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
	// and describes what it did; partitions > 0 hash-partitions a new
	// PostgreSQL schema by user (pgstore.MigrateConfig.Partitions).
	migrate func(ctx context.Context, partitions int) (string, error)
	// distribute distributes the migrated wallet and key table by user on
	// a Citus coordinator (migrate --citus) and returns the tables it
	// distributed; nil where there is no Citus.
	distribute func(ctx context.Context) ([]string, error)
	// durability reads whether a committed key could be lost on a crash or
	// a failover (pgstore.CheckDurability); nil where not checked.
	durability func(ctx context.Context) (pgstore.Durability, error)
	close      func()
}

// openBackend opens db and checks that it answers.
func openBackend(ctx context.Context, db dburl.DB) (*backend, error) {
	switch db.Kind {
	case dburl.Postgres:
		return openPostgres(ctx, db)
	case dburl.MySQL:
		return openMySQL(ctx, db)
	}
	return openSQLite(db.DSN)
}

func openPostgres(ctx context.Context, db dburl.DB) (*backend, error) {
	trips := &roundtrip.Counter{}
	pool, err := dbconn.Postgres(ctx, db, trips)
	if err != nil {
		return nil, err
	}
	display := db.String()
	return &backend{
		kind: "postgres", display: display, trips: trips,
		store: pgstore.New(pool), ledger: pgledger.New(pool),
		migrate: func(ctx context.Context, partitions int) (string, error) {
			keys, err := pgstore.MigrateWithConfig(ctx, pool, pgstore.MigrateConfig{Partitions: partitions})
			if err != nil {
				return "", err
			}
			wallet, err := pgledger.MigrateWithConfig(ctx, pool, pgledger.MigrateConfig{Partitions: partitions})
			return describeMigrations(keys, wallet), err
		},
		distribute: func(ctx context.Context) ([]string, error) {
			wallet, err := pgledger.Distribute(ctx, pool)
			if err != nil {
				return wallet, err
			}
			keys, err := pgstore.Distribute(ctx, pool, pgstore.DistributeConfig{ColocateWith: "users"})
			return append(wallet, keys...), err
		},
		durability: func(ctx context.Context) (pgstore.Durability, error) { return pgstore.CheckDurability(ctx, pool) },
		close:      pool.Close,
	}, nil
}

// openMySQL opens a MySQL or MariaDB database (see dbconn.MySQL).
func openMySQL(ctx context.Context, d dburl.DB) (*backend, error) {
	display := d.String()
	db, err := dbconn.MySQL(ctx, d)
	if err != nil {
		return nil, err
	}
	st, err := mysqlstore.New(db, mysqlstore.Config{})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &backend{
		kind: "mysql", display: display,
		store: st, ledger: mysqlledger.New(db),
		migrate: func(ctx context.Context, partitions int) (string, error) {
			if err := noPartitions("MySQL", partitions); err != nil {
				return "", err
			}
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
		return nil, dburl.ScrubError(err, path)
	}
	return &backend{
		kind: "sqlite", display: dburl.Display(path),
		store: sqlitestore.New(db), ledger: sqliteledger.New(db),
		migrate: func(ctx context.Context, partitions int) (string, error) {
			if err := noPartitions("SQLite", partitions); err != nil {
				return "", err
			}
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

// noPartitions refuses partitions on a database that has none to offer.
func noPartitions(kind string, partitions int) error {
	if partitions > 0 {
		return fmt.Errorf("--partitions is for PostgreSQL: a %s schema is not partitioned", kind)
	}
	return nil
}

func describeMigrations(keys, wallet []int) string {
	if len(keys) == 0 && len(wallet) == 0 {
		return "schema is up to date"
	}
	return fmt.Sprintf("applied migrations: idempotency keys %v, wallet %v", keys, wallet)
}
