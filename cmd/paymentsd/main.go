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
//
// The database is a SQLite file (default paymentsd.db in the working
// directory) or, given a postgres:// URL, PostgreSQL: see --db. Run
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
	"strings"
	"syscall"
)

const usage = `paymentsd: a multi-currency wallet whose money-moving requests take effect once.

Usage:
  paymentsd [serve] [flags]       run the HTTP server (the default command)
  paymentsd migrate [flags]       create or upgrade the database schema
  paymentsd users create [flags]  create a user; print {"user_id","api_key"} as JSON
  paymentsd keys show [flags]     print an idempotency record's state (--user-id, --key)
  paymentsd keys sweep [flags]    delete the idempotency records past their retention, once
  paymentsd help                  show this help

Run 'paymentsd <command> -h' for a command's flags. The database is --db, else
$DATABASE_URL, else the SQLite file paymentsd.db in the working directory.
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
		if len(args) == 0 || args[0] != "create" {
			return usageError("usage: paymentsd users create [--db URL]")
		}
		return usersCreate(ctx, args[1:], stdout, stderr, getenv)
	case "keys":
		return keysCmd(ctx, args, stdout, stderr, getenv)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError("unknown command %q (run 'paymentsd help')", cmd)
}

// errHelp: -h was asked for and the usage printed; exit 0.
var errHelp = errors.New("help shown")

// parseFlags parses a command's flags. A bad flag is one line naming it;
// -h prints the command's usage.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, synopsis string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return errHelp
	case err != nil:
		return usageError("%s: %v (run 'paymentsd %s -h' for usage)", fs.Name(), err, fs.Name())
	case fs.NArg() > 0:
		return usageError("%s: unexpected argument %q (run 'paymentsd %s -h' for usage)", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// dbFlag adds --db to fs. Its value, when not given, is $DATABASE_URL, else
// the SQLite default.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the database: a SQLite file path, or a postgres:// URL for PostgreSQL\n(default $DATABASE_URL, else "+defaultDB+" in the working directory)")
}

func resolveDB(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	if u := getenv("DATABASE_URL"); u != "" {
		return u
	}
	return defaultDB
}
