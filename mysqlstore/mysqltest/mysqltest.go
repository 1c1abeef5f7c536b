// Package mysqltest gives each test its own key table in a real MySQL or
// MariaDB: MYSQL_URL (a mysql:// URL or a go-sql-driver DSN), by default
// mysql://root@127.0.0.1:3306/. A test never skips for want of a server:
// it fails and says what to do.
package mysqltest

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/idem-dev/idem/mysqlstore"
)

// DefaultURL is the server used when MYSQL_URL is unset.
const DefaultURL = "mysql://root@127.0.0.1:3306/"

// Database is the database the tests' tables live in; each test's tables
// have names of their own.
const Database = "idem_test"

// URL returns the server's URL.
func URL() string {
	if u := os.Getenv("MYSQL_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var createOnce sync.Once

// DB returns a connection pool on the test database, created when
// missing, closed when the test ends. It has fewer connections than the
// conformance suite's 64 racers, so that tests in parallel stay within the
// server's max_connections.
func DB(t testing.TB) *sql.DB {
	t.Helper()
	cfg, err := mysqlstore.ParseDSN(URL())
	if err != nil {
		t.Fatalf("mysqltest: MYSQL_URL: %v", err)
	}
	var cerr error
	createOnce.Do(func() { cerr = adminExec(cfg, "CREATE DATABASE IF NOT EXISTS "+Database) })
	if cerr != nil {
		t.Fatalf("mysqltest: no MySQL or MariaDB at %s (%v): start one (apt-get install mariadb-server) or set MYSQL_URL", URL(), cerr)
	}
	cfg.DBName = Database
	db, err := mysqlstore.Open(cfg.FormatDSN())
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { db.Close() })
	return db
}

// Table returns a fresh key table's name, dropped with its migrations
// table when the test ends.
func Table(t testing.TB, db *sql.DB) string {
	t.Helper()
	name := "k_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name+", "+name+"_migrations")
	})
	return name
}

// Store returns a migrated store on a fresh table of the test database.
func Store(t testing.TB) (*sql.DB, mysqlstore.Config) {
	t.Helper()
	db := DB(t)
	opts := mysqlstore.Config{Table: Table(t, db)}
	if _, err := mysqlstore.Migrate(context.Background(), db, opts); err != nil {
		t.Fatalf("mysqltest: migrate: %v", err)
	}
	return db, opts
}

// NewDatabase creates a database of the test's own, for tables whose
// names are fixed (an application's beside the key table), dropped when
// the test ends, and returns its mysql:// URL: MYSQL_URL's server,
// user and parameters, another database.
func NewDatabase(t testing.TB) string {
	t.Helper()
	cfg, err := mysqlstore.ParseDSN(URL())
	if err != nil {
		t.Fatalf("mysqltest: MYSQL_URL: %v", err)
	}
	name := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	if err := adminExec(cfg, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("mysqltest: no MySQL or MariaDB at %s (%v): start one (apt-get install mariadb-server) or set MYSQL_URL", URL(), err)
	}
	t.Cleanup(func() { _ = adminExec(cfg, "DROP DATABASE IF EXISTS "+name) })
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + name}
	switch {
	case cfg.Passwd != "":
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	case cfg.User != "":
		u.User = url.User(cfg.User)
	}
	if orig, err := url.Parse(URL()); err == nil && orig.Scheme == "mysql" {
		u.RawQuery = orig.RawQuery
	}
	return u.String()
}

// adminExec runs sql on cfg's server, outside any database.
func adminExec(cfg *mysql.Config, sql string) error {
	admin := *cfg
	admin.DBName = ""
	db, err := mysqlstore.Open(admin.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(context.Background(), sql)
	return err
}
