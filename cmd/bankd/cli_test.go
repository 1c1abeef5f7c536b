package main_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// A bad command line is one error line and exit status 2; a database that
// cannot be opened, one line and 1.
func TestBadCommandLines(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"UnknownFlag", []string{"--nope"}, 2, "flag provided but not defined: --nope (run 'bankd --help' for usage)"},
		{"Argument", []string{"migrate"}, 2, `unexpected argument "migrate"`},
		{"UnknownFault", []string{"--faults", "error-before=0.1,flaky=0.1"}, 2, `--faults: unknown fault "flaky"`},
		{"FaultWithoutProbability", []string{"--faults", "hang"}, 2, `--faults: fault "hang": want name=probability`},
		{"ProbabilityOverOne", []string{"--faults", "hang=1.5"}, 2, `probability "1.5" is not a number in [0, 1]`},
		{"ProbabilityNaN", []string{"--faults", "hang=NaN"}, 2, `probability "NaN" is not a number in [0, 1]`},
		{"SumOverOne", []string{"--faults", "error-before=0.6,error-after=0.6"}, 2, "fault probabilities sum to 1.2, more than 1"},
		{"FaultTwice", []string{"--faults", "hang=0.1,hang=0.2"}, 2, `fault "hang" given twice`},
		{"BadSeed", []string{"--seed", "-1"}, 2, "invalid value"},
		{"ZeroSlowDelay", []string{"--slow-delay", "0s"}, 2, "--slow-delay must be positive"},
		{"PostgresDatabase", []string{"--db", "postgres://u:s3cret@127.0.0.1/db"}, 2, "--db postgres://127.0.0.1/db: bankd keeps its transfers in a SQLite file"},
		{"BadLogFormat", []string{"--log-format", "xml"}, 2, `--log-format "xml": want text or json`},
		{"DatabaseDirMissing", []string{"--db", filepath.Join(t.TempDir(), "missing", "bank.db")}, 1, "bank.db"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--addr", "127.0.0.1:0", "--db", db}, c.args...)
			var stderr bytes.Buffer
			cmd := exec.Command(binary, args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
			require.Equal(t, c.code, exit.ExitCode(), "stderr: %s", stderr.String())
			out := stderr.String()
			require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
			require.True(t, strings.HasPrefix(out, "bankd: "), "%q", out)
			require.Contains(t, out, c.says)
			require.NotContains(t, out, "s3cret")
		})
	}
}

// TestHelp: --help and the help command print the usage on stdout, flags
// spelt --name, and exit 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "%v: %s", args, stderr.String())
		require.Empty(t, stderr.String())
		require.Contains(t, stdout.String(), "Usage: bankd")
		for _, c := range []string{"bankd [serve]", "bankd version", "bankd help"} {
			require.Contains(t, stdout.String(), c, "the commands are listed as paymentsd and idem-gateway list theirs")
		}
		for _, f := range []string{"--addr", "--db", "--faults", "--log-level", "--log-format"} {
			require.Contains(t, stdout.String(), f)
		}
		require.NotRegexp(t, `(?m)^\s+-[a-z]`, stdout.String(), "flags are spelt --name")
	}
}

// TestServeCommand: "bankd serve", the command paymentsd and idem-gateway
// name theirs by, runs the bank, as bankd alone does; "bankd version"
// prints the version.
func TestServeCommand(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	b := startBankWith(t, db, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})
	r := b.post(t, "serve-1", body(700, "acct-1"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	b.stop(t)

	out, err := exec.Command(binary, "version").Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), "bankd "), "%q", out)
}
