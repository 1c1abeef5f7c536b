package main

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/cmd/internal/dbconn"
	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/cmd/internal/roundtrip"
	"github.com/idem-dev/idem/mysqlstore"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

// defaultDB is the key store when neither --db nor $DATABASE_URL is set.
const defaultDB = "idem-gateway.db"

// keyStore is the key store on one database.
type keyStore struct {
	db    dburl.DB
	store store.Store
	// upstreams are the configuration file's, for the keys commands; none
	// without --config.
	upstreams []*upstream
	// migrate applies the key table's pending migrations and returns them.
	migrate func(ctx context.Context) ([]int, error)
	// distribute distributes the migrated key table on a Citus
	// coordinator (migrate --citus); nil where there is no Citus.
	distribute func(ctx context.Context) ([]string, error)
	// ping checks that the database answers: /readyz.
	ping func(ctx context.Context) error
	// durability reads whether a committed key could be lost on a crash or
	// a failover (pgstore.CheckDurability); nil where not checked.
	durability func(ctx context.Context) (pgstore.Durability, error)
	// trips counts the round trips to PostgreSQL (nil for the other
	// stores): the cost per request make bench reports, on /metrics.
	trips *roundtrip.Counter
	close func()
}

// openStore opens the key store db names, not migrated.
func openStore(ctx context.Context, db dburl.DB) (*keyStore, error) {
	switch db.Kind {
	case dburl.Postgres:
		trips := &roundtrip.Counter{}
		pool, err := dbconn.Postgres(ctx, db, trips)
		if err != nil {
			return nil, err
		}
		return &keyStore{db: db, store: pgstore.New(pool), close: pool.Close, ping: pool.Ping, trips: trips,
			migrate: func(ctx context.Context) ([]int, error) { return pgstore.Migrate(ctx, pool) },
			distribute: func(ctx context.Context) ([]string, error) {
				return pgstore.Distribute(ctx, pool, pgstore.DistributeConfig{})
			},
			durability: func(ctx context.Context) (pgstore.Durability, error) { return pgstore.CheckDurability(ctx, pool) }}, nil
	case dburl.MySQL:
		sdb, err := dbconn.MySQL(ctx, db)
		if err != nil {
			return nil, err
		}
		st, err := mysqlstore.New(sdb, mysqlstore.Config{})
		if err != nil {
			_ = sdb.Close()
			return nil, err
		}
		return &keyStore{db: db, store: st, close: func() { _ = sdb.Close() }, ping: sdb.PingContext,
			migrate: func(ctx context.Context) ([]int, error) { return mysqlstore.Migrate(ctx, sdb, mysqlstore.Config{}) }}, nil
	}
	sdb, err := sqlitestore.Open(db.DSN)
	if err != nil {
		return nil, dburl.ScrubError(err, db.DSN)
	}
	return &keyStore{db: db, store: sqlitestore.New(sdb), close: func() { _ = sdb.Close() }, ping: sdb.PingContext,
		migrate: func(ctx context.Context) ([]int, error) { return sqlitestore.Migrate(ctx, sdb) }}, nil
}

// openMigrated opens the key store and applies its pending migrations.
func openMigrated(ctx context.Context, db dburl.DB) (*keyStore, []int, error) {
	ks, err := openStore(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	applied, err := ks.migrate(ctx)
	if err != nil {
		ks.close()
		return nil, nil, fmt.Errorf("migrate the key store %s: %w", db, err)
	}
	return ks, applied, nil
}
