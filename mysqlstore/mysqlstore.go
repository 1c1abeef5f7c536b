// Package mysqlstore keeps idempotency records in MySQL or MariaDB
// (InnoDB), through github.com/go-sql-driver/mysql. It is package
// sqlstore's engine with its MySQL dialect: the request's transaction is a
// *sql.Tx that repositories reach through sqlstore.DB.
//
// The claim is one INSERT … ON DUPLICATE KEY UPDATE that changes nothing on
// a recorded key (INSERT IGNORE would turn other errors into warnings too);
// every later write names the attempt's fencing token; every time is the
// database's UTC_TIMESTAMP(6). Transactions run at READ COMMITTED (see
// package sqlstore for why, and for how waits are bounded).
//
// Connections need no particular DSN parameters, but clientFoundRows must
// stay off: the claim tells an insert from a recorded key by the count of
// changed rows. Open checks it.
package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/idem-dev/idem/sqlstore"
)

// Dialect is sqlstore's MySQL dialect bound to go-sql-driver/mysql's
// errors.
var Dialect = sqlstore.MySQL(func(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, true
	}
	return 0, false
})

// Config configures a Store.
type Config struct {
	// Table is the key table's name, a plain identifier. Default:
	// sqlstore.DefaultTable ("idempotency_keys").
	Table string
}

func (o Config) sql() sqlstore.Config { return sqlstore.Config{Dialect: Dialect, Table: o.Table} }

// New returns a store on db, which should come from Open. It fails when
// opts.Table is not an identifier.
func New(db *sql.DB, opts Config) (*sqlstore.Store, error) { return sqlstore.New(db, opts.sql()) }

// Migrate creates or upgrades the key table (sqlstore.Migrate).
func Migrate(ctx context.Context, db *sql.DB, opts Config) ([]int, error) {
	return sqlstore.Migrate(ctx, db, opts.sql())
}

// MigrationSQL returns the migrations as one plain SQL script.
func MigrationSQL(opts Config) (string, error) { return sqlstore.MigrationSQL(opts.sql()) }

// Open opens a database from a DSN in go-sql-driver/mysql's form
// (user:password@tcp(host:3306)/db) or a URL (mysql://user:password@host:3306/db).
// It fails on clientFoundRows=true, which the claim cannot work with.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.ClientFoundRows {
		return nil, errors.New("mysqlstore: clientFoundRows=true: the claim counts changed rows, turn it off")
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %w", err)
	}
	return sql.OpenDB(c), nil
}

// ParseDSN reads a DSN in go-sql-driver/mysql's form, or a mysql:// URL:
// mysql://user:password@host:port/db?param=value (the port defaults to
// 3306; the parameters are the driver's).
func ParseDSN(dsn string) (*mysql.Config, error) {
	if !strings.HasPrefix(dsn, "mysql://") {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: %w", err)
		}
		return cfg, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %w", err)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":3306"
	}
	var auth string
	if u.User != nil {
		auth = u.User.Username()
		if p, ok := u.User.Password(); ok {
			auth += ":" + p
		}
		auth += "@"
	}
	driverDSN := fmt.Sprintf("%stcp(%s)/%s", auth, host, strings.TrimPrefix(u.Path, "/"))
	if u.RawQuery != "" {
		driverDSN += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(driverDSN)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %w", err)
	}
	return cfg, nil
}
