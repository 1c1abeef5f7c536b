// Command paymentsd is a multi-currency wallet service built on idem: users
// deposit money and convert it between currencies over a JSON HTTP API, and
// every request that moves money takes effect once, however often it is
// retried.
//
// Usage:
//
//	paymentsd [serve] [flags]     run the HTTP server (the default)
//	paymentsd migrate [flags]     create or upgrade the database schema
//	paymentsd users create [flags] create a user; print its id and API key as JSON
//	paymentsd keys show [flags]   print an idempotency record's state
//	paymentsd keys sweep [flags]  delete the records past their retention, once
//	paymentsd version             print the version and commit (also --version)
//
// The database is a SQLite file (default paymentsd.db in the working
// directory) or, given a postgres:// URL, PostgreSQL, or, given a mysql://
// URL, MySQL or MariaDB: see --db. Run
// "paymentsd help" or any command with -h for its flags; docs/paymentsd.md
// has the rest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/idem-dev/idem/cmd/internal/version"
)

const usage = `paymentsd: a multi-currency wallet whose money-moving requests take effect once.

Usage:
  paymentsd [serve] [flags]       run the HTTP server (the default command)
  paymentsd migrate [flags]       create or upgrade the database schema
  paymentsd users create [flags]  create a user; print {"user_id","api_key"} as JSON
  paymentsd keys show [flags]     print an idempotency record's state (--user-id, --key)
  paymentsd keys sweep [flags]    delete the idempotency records past their retention, once
  paymentsd version               print the version and the commit it was built from
  paymentsd help                  show this help

Run 'paymentsd <command> --help' for a command's flags. The database is --db (a
postgres:// or postgresql:// URL, a mysql:// URL, or a SQLite file path), else
$DATABASE_URL, else the SQLite file paymentsd.db in the working directory.
`

const usersUsage = `Usage: paymentsd users <subcommand> [flags]

Subcommands:
  create    create a user; print {"user_id","api_key"} as JSON (the key is shown only once)

Run 'paymentsd users create --help' for its flags.
`

const keysUsage = `Usage: paymentsd keys <subcommand> [flags]

Subcommands:
  show      print an idempotency record's state (--user-id, --key); never a body
  sweep     delete the idempotency records past their retention, once; print {"deleted":N}

Run 'paymentsd keys show --help' or 'paymentsd keys sweep --help' for their flags.
`

// exitError carries an exit code: 2 for a usage error, 1 for anything else.
type exitError struct {
	code   int
	err    error
	logged bool // already printed by the command's logger, in its format
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// logged marks err as printed already, keeping its exit code.
func logged(err error) error {
	code := 1
	if e, ok := errors.AsType[*exitError](err); ok {
		code = e.code
	}
	return &exitError{code: code, err: err, logged: true}
}

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("paymentsd"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	if err == nil || errors.Is(err, errHelp) {
		return
	}
	code := 1
	if e, ok := errors.AsType[*exitError](err); ok {
		if code = e.code; e.logged {
			os.Exit(code)
		}
	}
	// One line, whatever the error says: a driver's message may span several.
	fmt.Fprintln(os.Stderr, "paymentsd: "+strings.Join(strings.Fields(err.Error()), " "))
	os.Exit(code)
}

// run dispatches a command line. ctx ends on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stdout, stderr, getenv)
	case "migrate":
		return migrateCmd(ctx, args, stdout, stderr, getenv)
	case "users":
		return group("users", args, stdout, usersUsage, map[string]func([]string) error{
			"create": func(args []string) error { return usersCreate(ctx, args, stdout, stderr, getenv) },
		})
	case "keys":
		return group("keys", args, stdout, keysUsage, map[string]func([]string) error{
			"show":  func(args []string) error { return keysShow(ctx, args, stdout, stderr, getenv) },
			"sweep": func(args []string) error { return keysSweep(ctx, args, stdout, stderr, getenv) },
		})
	}
	return usageError("unknown command %q (run 'paymentsd --help')", cmd)
}

// dbFlag adds --db to fs. Its value, when not given, is $DATABASE_URL, else
// the SQLite default.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the database: a postgres:// or postgresql:// URL for PostgreSQL, a mysql://user:password@host:3306/db\nURL for MySQL or MariaDB, or a SQLite file path (default $DATABASE_URL, else "+defaultDB+" in the working directory)")
}

// resolveDB returns the database a command uses: --db, else $DATABASE_URL,
// else the SQLite default. A value that is neither a PostgreSQL or MySQL
// URL nor a file path is a usage error, before anything is opened or
// created.
func resolveDB(flagValue string, getenv func(string) string) (string, error) {
	db, from := flagValue, "--db"
	if db == "" {
		db, from = getenv("DATABASE_URL"), "$DATABASE_URL"
	}
	if db == "" {
		return defaultDB, nil
	}
	if isPostgresURL(db) || isMySQLURL(db) {
		return db, nil
	}
	if conninfo.MatchString(db) {
		return "", usageError("%s %q is a key=value connection string; give a URL, such as postgres://user@host:5432/dbname", from, redactConninfo(db))
	}
	if m := scheme.FindStringSubmatch(db); m != nil {
		return "", usageError("%s: %s URLs are not supported; give a postgres:// or postgresql:// URL, a mysql:// URL, or a SQLite file path", from, m[1])
	}
	return db, nil
}

var (
	// conninfo matches a libpq key=value connection string ("host=x dbname=y").
	conninfo = regexp.MustCompile(`^\s*[a-z_]+\s*=`)
	// scheme matches a URL or URI scheme of two letters or more (not a
	// Windows drive letter).
	scheme = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]+):`)
	// password matches the password of a key=value connection string.
	password = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)
)

// redactConninfo hides the password of a key=value connection string.
func redactConninfo(s string) string { return password.ReplaceAllString(s, "${1}xxxxx") }
