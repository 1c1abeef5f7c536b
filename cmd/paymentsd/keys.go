package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// keyState is what keys show prints: the record's state, never its
// request or response body.
type keyState struct {
	Scope          string    `json:"scope"`
	Key            string    `json:"key"`
	Status         string    `json:"status"`
	Attempts       int       `json:"attempts"`
	Request        string    `json:"request"`
	CreatedAt      time.Time `json:"created_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	LeaseLive      bool      `json:"lease_live"`
	ExpiresAt      time.Time `json:"expires_at"`
	Expired        bool      `json:"expired"`
	CompletedAt    time.Time `json:"completed_at,omitzero"` // absent until the response is stored
	ResponseCode   int       `json:"response_code,omitempty"`
	Resource       string    `json:"resource,omitempty"`
	// RecoveryPoint and ProviderKeys say where an unfinished operation
	// stands: outcome-unknown, and the key sent to the bank under "bank"
	// (what to ask bankd for).
	RecoveryPoint string            `json:"recovery_point,omitempty"`
	ProviderKeys  map[string]string `json:"provider_keys,omitempty"`
	// Payout is the payout sent to the bank under provider_keys.bank.
	Payout *payoutState `json:"payout,omitempty"`
	// Deprecated: scope, lease_expires_at and lease_live under their
	// names before the glossary's, printed one release more for scripts.
	UserID        string    `json:"user_id"`
	LockExpiresAt time.Time `json:"lock_expires_at"`
	LockLive      bool      `json:"lock_live"`
}

// payoutState is a key's payout as keys show prints it: BankOutcomeCause
// says why a pending payout's bank outcome is unknown (empty when no bank
// call of it has failed, or when the attempt ended before one did).
type payoutState struct {
	ID               string `json:"id"`
	Status           string `json:"status"`
	BankOutcomeCause string `json:"bank_outcome_cause,omitempty"`
}

// keysShow prints one record's state as a JSON object.
func keysShow(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("keys show", flag.ContinueOnError)
	db := dbFlag(fs)
	scope := fs.String("scope", "", "the scope the key belongs to: the user's id (required)")
	cli.Alias(fs, "user-id", "scope")
	key := fs.String("key", "", "the Idempotency-Key, unquoted (required)")
	if err := cli.ParseFlags(fs, args, stdout, "paymentsd", "paymentsd keys show --scope USER_ID --key KEY [--db URL]\n\nPrints an idempotency record's state (status, attempts, lock, expiry, completion time, stored status code) as JSON,\nwith an unfinished operation's recovery point, the keys sent downstream (provider_keys.bank: the bank's key)\nand the payout sent under it (payout.bank_outcome_cause: why its bank outcome is unknown).\nIt never prints a request or response body."); err != nil {
		return err
	}
	cli.WarnDeprecated(fs, stderr, "paymentsd")
	if *scope == "" || *key == "" {
		return cli.Usagef("keys show: --scope and --key are required")
	}
	b, err := openMigrated(ctx, *db, getenv)
	if err != nil {
		return err
	}
	defer b.close()
	rec, err := b.store.Get(ctx, *scope, *key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("keys show: no record for key %q in scope %s (never used, or swept after its retention)", *key, *scope)
	}
	if err != nil {
		return fmt.Errorf("keys show: %w", err)
	}
	s := keyState{
		Scope: rec.Scope, Key: rec.Key, Status: string(rec.Status), Attempts: rec.Attempts,
		Request:   rec.Fingerprint.Method + " " + rec.Fingerprint.Path,
		CreatedAt: rec.CreatedAt.UTC(), LeaseExpiresAt: rec.LeaseExpiresAt.UTC(), LeaseLive: rec.LeaseLive,
		ExpiresAt: rec.ExpiresAt.UTC(), Expired: rec.Expired, RecoveryPoint: rec.RecoveryPoint,
		CompletedAt: rec.CompletedAt.UTC(),
	}
	if b.store.Capabilities().Search {
		if s.ProviderKeys, err = b.store.ProviderKeys(ctx, rec.Scope, rec.Key); err != nil {
			return fmt.Errorf("keys show: provider keys: %w", err)
		}
	}
	if bankKey := s.ProviderKeys["bank"]; bankKey != "" {
		p, err := b.ledger.PayoutByBankKey(ctx, rec.Scope, bankKey)
		switch {
		case err == nil:
			s.Payout = &payoutState{ID: p.ID, Status: string(p.Status), BankOutcomeCause: p.BankOutcomeCause}
		case !errors.Is(err, payments.ErrNotFound):
			return fmt.Errorf("keys show: payout: %w", err)
		}
	}
	if r := rec.Response; r != nil {
		s.ResponseCode = r.StatusCode
		if r.ResourceID != "" {
			s.Resource = r.ResourceType + "/" + r.ResourceID
		}
	}
	s.UserID, s.LockExpiresAt, s.LockLive = s.Scope, s.LeaseExpiresAt, s.LeaseLive
	return printJSON(stdout, s)
}

// keysSweep deletes every record past its retention once and prints how
// many it deleted.
func keysSweep(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("keys sweep", flag.ContinueOnError)
	db := dbFlag(fs)
	batch := fs.Int("batch-size", sweeper.DefaultBatchSize, "the most records one batch deletes, in one short transaction")
	pause := fs.Duration("pause", sweeper.DefaultPause, "the wait between two batches")
	if err := cli.ParseFlags(fs, args, stdout, "paymentsd", "paymentsd keys sweep [--db URL] [--batch-size N] [--pause DURATION]\n\nDeletes every idempotency record past its retention, in bounded batches, once, and prints {\"deleted\":N}."); err != nil {
		return err
	}
	if *batch <= 0 || *pause < 0 {
		return cli.Usagef("keys sweep: --batch-size must be positive and --pause not negative, got %d and %v", *batch, *pause)
	}
	b, err := openMigrated(ctx, *db, getenv)
	if err != nil {
		return err
	}
	defer b.close()
	sw, err := newSweeper(b, sweeper.Config{BatchSize: *batch, Pause: *pause})
	if err != nil {
		return cli.Usagef("keys sweep: %v", err)
	}
	n, err := sw.Once(ctx)
	if err != nil {
		return fmt.Errorf("keys sweep: deleted %d, then: %w", n, err)
	}
	return printJSON(stdout, struct {
		Deleted int `json:"deleted"`
	}{n})
}

// newSweeper returns a sweeper on b's store. It deletes key records and
// nothing else: the wallet's tables do not depend on them.
func newSweeper(b *backend, cfg sweeper.Config) (*sweeper.Sweeper, error) {
	if !b.store.Capabilities().Sweep {
		return nil, fmt.Errorf("the %s store cannot sweep", b.kind)
	}
	return sweeper.New(b.store, cfg)
}

// openMigrated opens the database and applies pending migrations.
func openMigrated(ctx context.Context, db string, getenv func(string) string) (*backend, error) {
	url, err := resolveDB(db, getenv)
	if err != nil {
		return nil, err
	}
	b, err := openBackend(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := b.migrate(ctx, 0); err != nil {
		b.close()
		return nil, fmt.Errorf("migrate %s: %w", b.display, err)
	}
	return b, nil
}

func printJSON(w io.Writer, v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
