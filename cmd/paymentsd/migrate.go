package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/idem-dev/idem/cmd/internal/cli"
)

// migrateCmd applies pending migrations (the key table's and the
// wallet's) and says what it did. serve does the same at start; this is for
// deploys that migrate first.
func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	db := dbFlag(fs)
	partitions := fs.Int("partitions", 0, "hash-partition the key table and the wallet's tables by user into this many partitions\n(PostgreSQL; read when the schema is created, a migrated schema keeps its layout)")
	citus := fs.Bool("citus", false, "then distribute every table by user on a Citus coordinator (docs/operations.md, \"Running on Citus\");\ntables already distributed are left alone")
	if err := cli.ParseFlags(fs, args, stdout, "paymentsd", "paymentsd migrate [--db URL] [--partitions N] [--citus]\n\nCreates or upgrades the database schema: the idempotency key table and the wallet's tables."); err != nil {
		return err
	}
	url, err := resolveDB(*db, getenv)
	if err != nil {
		return err
	}
	b, err := openBackend(ctx, url)
	if err != nil {
		return err
	}
	defer b.close()
	what, err := b.migrate(ctx, *partitions)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", b.display, err)
	}
	if _, err := fmt.Fprintf(stdout, "paymentsd: %s (%s %s)\n", what, b.kind, b.display); err != nil || !*citus {
		return err
	}
	if b.distribute == nil {
		return fmt.Errorf("--citus is for PostgreSQL with the citus extension, not %s", b.kind)
	}
	tables, err := b.distribute(ctx)
	if err != nil {
		return fmt.Errorf("distribute %s: %w", b.display, err)
	}
	return cli.PrintDistributed(stdout, "paymentsd", tables)
}
