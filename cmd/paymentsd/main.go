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
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/cmd/internal/dburl"
)

const usage = `paymentsd: a multi-currency wallet whose money-moving requests take effect once.

Usage:
  paymentsd [serve] [flags]       run the HTTP server (the default command)
  paymentsd migrate [flags]       create or upgrade the database schema
  paymentsd users create [flags]  create a user; print {"user_id","api_key"} as JSON
  paymentsd keys show [flags]     print an idempotency record's state (--scope, --key)
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
  show      print an idempotency record's state (--scope, --key); never a body
  sweep     delete the idempotency records past their retention, once; print {"deleted":N}

Run 'paymentsd keys show --help' or 'paymentsd keys sweep --help' for their flags.
`

func main() {
	cli.Main("paymentsd", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return run(ctx, args, stdout, stderr, os.Getenv)
	})
}

// run dispatches a command line. ctx ends on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) > 0 && cli.IsHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return cli.ErrHelp
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
		return cli.Group("paymentsd", "users", args, stdout, usersUsage, map[string]func([]string) error{
			"create": func(args []string) error { return usersCreate(ctx, args, stdout, stderr, getenv) },
		})
	case "keys":
		return cli.Group("paymentsd", "keys", args, stdout, keysUsage, map[string]func([]string) error{
			"show":  func(args []string) error { return keysShow(ctx, args, stdout, stderr, getenv) },
			"sweep": func(args []string) error { return keysSweep(ctx, args, stdout, stderr, getenv) },
		})
	}
	return cli.Usagef("unknown command %q (run 'paymentsd --help')", cmd)
}

// dbFlag adds --db to fs. Its value, when not given, is $DATABASE_URL, else
// the SQLite default.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the database: a postgres:// or postgresql:// URL for PostgreSQL, a mysql://user:password@host:3306/db\nURL for MySQL or MariaDB, or a SQLite file path (default $DATABASE_URL, else "+defaultDB+" in the working directory)")
}

// resolveDB returns the database a command uses: --db, else $DATABASE_URL,
// else the SQLite default. A value that names no supported database is a
// usage error, before anything is opened or created.
func resolveDB(flagValue string, getenv func(string) string) (dburl.DB, error) {
	return dburl.Resolve(flagValue, getenv, defaultDB)
}
