// Package dburl is the one reading of a database argument (--db, else
// $DATABASE_URL) shared by every binary of the repository: which database
// it names, in what form its driver wants it, and how to print it, and
// any text that may quote it, without a credential.
//
// The forms it accepts:
//
//	postgres://user:password@host:5432/db?sslmode=disable   PostgreSQL (postgresql:// too; several hosts:
//	                                                        postgres://h1:5432,h2:5432/db?target_session_attrs=read-write)
//	mysql://user:password@host:3306/db?parseTime=true       MySQL or MariaDB
//	user:password@tcp(host:3306)/db?parseTime=true          MySQL or MariaDB, go-sql-driver/mysql's DSN
//	path/to/file.db, sqlite:path/to/file.db, sqlite:///abs/file.db   SQLite
//
// Anything else, a libpq key=value string or another scheme, is refused
// before anything is opened or created.
package dburl

import (
	"fmt"
	"regexp"
	"strings"
)

// Kind is a database engine.
type Kind string

// The engines.
const (
	Postgres Kind = "postgres"
	MySQL    Kind = "mysql"
	SQLite   Kind = "sqlite"
)

// DB is a parsed database argument.
type DB struct {
	Kind Kind
	// DSN is what the driver opens: the URL as given for PostgreSQL, the
	// URL or DSN as given for MySQL (mysqlstore.ParseDSN reads both), the
	// file path for SQLite.
	DSN string
}

// String is the database as it may be printed: Display of its DSN.
func (d DB) String() string { return Display(d.DSN) }

// Error is a database argument that names no supported database: a usage
// error, its message one line, without a credential.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Resolve returns the database a command uses: flagValue (--db), else
// $DATABASE_URL, else def, the SQLite file used when neither is set.
func Resolve(flagValue string, getenv func(string) string, def string) (DB, error) {
	db, from := flagValue, "--db"
	if db == "" {
		db, from = getenv("DATABASE_URL"), "$DATABASE_URL"
	}
	if db == "" {
		return DB{Kind: SQLite, DSN: def}, nil
	}
	return parse(db, from)
}

// Parse reads a database argument named by flag (such as "--db").
func Parse(s, flag string) (DB, error) { return parse(s, flag) }

const supported = "give a postgres:// or postgresql:// URL, a mysql:// URL or user@tcp(host:3306)/db DSN, or a SQLite file path"

func parse(s, from string) (DB, error) {
	switch {
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		if hostPart(s) == "" {
			return DB{}, &Error{fmt.Sprintf("%s %s names no host; %s", from, Display(s), supported)}
		}
		return DB{Kind: Postgres, DSN: s}, nil
	case strings.HasPrefix(s, "mysql://"):
		if hostPart(s) == "" {
			return DB{}, &Error{fmt.Sprintf("%s %s names no host; %s", from, Display(s), supported)}
		}
		return DB{Kind: MySQL, DSN: s}, nil
	case mysqlDSN.MatchString(s):
		return DB{Kind: MySQL, DSN: s}, nil
	case strings.HasPrefix(s, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(s, "sqlite:"), "//")
		if path == "" || strings.ContainsAny(path, "?#") {
			return DB{}, &Error{fmt.Sprintf("%s %s: want sqlite:PATH or sqlite:///ABSOLUTE/PATH, without parameters", from, Display(s))}
		}
		return DB{Kind: SQLite, DSN: path}, nil
	case conninfo.MatchString(s):
		return DB{}, &Error{fmt.Sprintf("%s %q is a key=value connection string; give a URL, such as postgres://user@host:5432/dbname", from, Display(s))}
	case scheme.MatchString(s):
		return DB{}, &Error{fmt.Sprintf("%s: %s URLs are not supported; %s", from, scheme.FindStringSubmatch(s)[1], supported)}
	case strings.TrimSpace(s) == "":
		return DB{}, &Error{fmt.Sprintf("%s is blank; %s", from, supported)}
	}
	return DB{Kind: SQLite, DSN: s}, nil
}

// hostPart is what lies between a URL's "//" and its path.
func hostPart(s string) string {
	_, rest, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}

var (
	// mysqlDSN matches go-sql-driver/mysql's DSN: [user[:password]@]net(addr)/db.
	mysqlDSN = regexp.MustCompile(`^(?:.*@)?(?:tcp|tcp4|tcp6|unix)\([^)]*\)/`)
	// conninfo matches a libpq key=value connection string ("host=x dbname=y").
	conninfo = regexp.MustCompile(`^\s*[a-z_]+\s*=`)
	// scheme matches a URL or URI scheme of two letters or more (not a
	// Windows drive letter).
	scheme = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]+):`)
)
