// Command idem-gateway puts the idem contract in front of any HTTP service,
// in any language: a reverse proxy that claims each guarded request's
// Idempotency-Key, forwards the first request, stores its final answer and
// replays it to every retry.
//
//	idem-gateway [serve] --config gateway.yaml
//	idem-gateway [serve] --addr 127.0.0.1:8081 --upstream http://127.0.0.1:9000 [--db URL] [--routes 'POST /v1/*'] …
//	idem-gateway migrate [--db URL] [--citus]
//	idem-gateway keys list|show|resolve|sweep [--db URL] …
//	idem-gateway version
//
// The configuration file (YAML) names several upstreams by path prefix and
// what each route does with keys; the keys commands show the keys whose
// upstream outcome is unknown and resolve them. See docs/gateway.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idem-dev/idem/cmd/internal/cli"
)

const usage = `idem-gateway: the idem contract in front of any HTTP service.

Usage:
  idem-gateway [serve] [flags]        run the gateway (the default command): --config FILE, or --upstream URL
  idem-gateway migrate [flags]        create or upgrade the key table
  idem-gateway keys list [flags]      list the keys whose upstream outcome is unknown
  idem-gateway keys show [flags]      print a key's state (--scope, --key); never a body
  idem-gateway keys resolve [flags]   resolve an unknown outcome: --reopen, or --status the upstream's answer
  idem-gateway keys sweep [flags]     delete the records past their retention, once
  idem-gateway version                print the version and the commit it was built from
  idem-gateway help                   show this help

Run 'idem-gateway <command> --help' for a command's flags. The key store is --db (a postgres:// URL,
a mysql:// URL or user@tcp(host:3306)/db DSN, or a SQLite file path), else $DATABASE_URL, else
the SQLite file idem-gateway.db in the working directory. docs/gateway.md has the rest.
`

func main() {
	cli.Main("idem-gateway", func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
		return migrateCmd(ctx, args, stdout, getenv)
	case "keys":
		return keysCmd(ctx, args, stdout, stderr, getenv)
	}
	return cli.Usagef("unknown command %q (run 'idem-gateway --help')", cmd)
}
