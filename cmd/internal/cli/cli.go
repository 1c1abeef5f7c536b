// Package cli is the command-line language every binary of the repository
// speaks: --flag spelling, --help on stdout with exit 0, a help command,
// a bad flag or argument as one line naming the fix with exit 2, other
// failures as one line with exit 1, --log-level and --log-format, and
// every line written to stderr redacted of database credentials.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/cmd/internal/version"
)

// ErrHelp: --help was asked for and the usage printed; exit 0.
var ErrHelp = errors.New("help shown")

// ExitError carries an exit code: 2 for a usage error, 1 for anything else.
type ExitError struct {
	Code   int
	Err    error
	Logged bool // already printed by the command's logger, in its format
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Usagef is a usage error: exit 2.
func Usagef(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// Logged marks err as printed already, keeping its exit code.
func Logged(err error) error {
	code := 1
	if e, ok := errors.AsType[*ExitError](err); ok {
		code = e.Code
	}
	return &ExitError{Code: code, Err: err, Logged: true}
}

// ExitCode is err's exit code: 0 for nil and ErrHelp, 2 for a usage error
// (a dburl.Error among them), else 1.
func ExitCode(err error) int {
	switch {
	case err == nil || errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, new(*dburl.Error)):
		return 2
	}
	if e, ok := errors.AsType[*ExitError](err); ok {
		return e.Code
	}
	return 1
}

// Main runs a program: --version (or the version command) prints its
// version; else run gets ctx, which ends on SIGINT or SIGTERM, and stdout
// and a stderr that redacts database credentials. An error run returns is
// printed on one line, prefixed with prog, unless it was logged already;
// Main exits with its code.
func Main(prog string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String(prog))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stderr := dburl.Writer(os.Stderr)
	err := run(ctx, os.Args[1:], os.Stdout, stderr)
	stop()
	code := ExitCode(err)
	if e, ok := errors.AsType[*ExitError](err); code != 0 && !(ok && e.Logged) {
		// One line, whatever the error says: a driver's message may span several.
		fmt.Fprintln(stderr, prog+": "+strings.Join(strings.Fields(err.Error()), " "))
	}
	os.Exit(code)
}

// PrintDistributed says which tables a migrate --citus distributed on the
// Citus coordinator, or that every one already was.
func PrintDistributed(w io.Writer, prog string, tables []string) error {
	what := "every table already distributed"
	if len(tables) > 0 {
		what = "distributed " + strings.Join(tables, ", ")
	}
	_, err := fmt.Fprintf(w, "%s: %s (Citus)\n", prog, what)
	return err
}
