package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/payments"
)

// usersCreate makes a user and prints one JSON object on stdout:
// {"user_id":"…","api_key":"…"}. The key is stored only as its hash, so this
// is the only time it is shown.
func usersCreate(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("users create", flag.ContinueOnError)
	db := dbFlag(fs)
	if err := cli.ParseFlags(fs, args, stdout, "paymentsd", "paymentsd users create [--db URL]\n\nCreates a user and prints {\"user_id\",\"api_key\"} as one JSON object.\nThe API key is shown only this once."); err != nil {
		return err
	}
	b, err := openMigrated(ctx, *db, getenv)
	if err != nil {
		return err
	}
	defer b.close()
	svc, err := payments.New(b.ledger, payments.Config{})
	if err != nil {
		return err
	}
	userID, apiKey, err := svc.CreateUser(ctx)
	if err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	out, err := json.Marshal(struct {
		UserID string `json:"user_id"`
		APIKey string `json:"api_key"`
	}{userID, apiKey})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}
