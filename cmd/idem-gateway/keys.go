package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

const keysUsage = `Usage: idem-gateway keys <subcommand> [flags]

Subcommands:
  list      list the keys in a state (--state unknown|in-flight|failed), one JSON object a line,
            with the key forwarded upstream and why an outcome is unknown; never a body
  show      print a key's state (--scope, --key); never a body
  resolve   resolve an unknown outcome, with a --reason: --reopen (the next retry is sent afresh),
            or --status/--body-file/--location (the upstream's real answer, replayed to every retry)
  sweep     delete the records past their retention, once; print {"deleted":N}

Run 'idem-gateway keys <subcommand> --help' for its flags. docs/gateway.md has the runbook.
`

// keysCmd dispatches "idem-gateway keys …": the operator's view of the
// keys whose upstream outcome is unknown, their resolution once the
// operator has found out what the upstream did, and the sweep. Every
// action that changes a record is logged on stderr.
func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	// sub is a subcommand: flags adds its flags and returns its action,
	// whose check runs before the store is opened.
	sub := func(name, synopsis string, flags func(fs *flag.FlagSet) action) func([]string) error {
		return func(args []string) error {
			fs := flag.NewFlagSet("keys "+name, flag.ContinueOnError)
			db := fs.String("db", "", "the key store, as serve's --db (default $DATABASE_URL, else "+defaultDB+")")
			config := fs.String("config", "", "serve's configuration file: its db, unless --db is given")
			act := flags(fs)
			if err := cli.ParseFlags(fs, args, stdout, "idem-gateway", synopsis); err != nil {
				return err
			}
			cli.WarnDeprecated(fs, stderr, "idem-gateway")
			if err := act.check(); err != nil {
				return err
			}
			ks, err := openKeys(ctx, *db, *config, getenv)
			if err != nil {
				return err
			}
			defer ks.close()
			return act.run(ks)
		}
	}
	return cli.Group("idem-gateway", "keys", args, stdout, keysUsage, map[string]func([]string) error{
		"list": sub("list", "idem-gateway keys list [--state unknown|in-flight|failed] [--since DURATION] [--limit N] [--db URL]\n\nLists the keys in a state, newest first, one JSON object a line; never a body.",
			func(fs *flag.FlagSet) action {
				state := fs.String("state", stateUnknown, "the keys to list: unknown (their upstream outcome is unknown), in-flight (claimed, not\ncompleted: lease_live says whether a gateway still holds it) or failed (freed for a retry)")
				since := fs.Duration("since", 0, "only the keys first used this long ago or less (default all)")
				limit := fs.Int("limit", 100, "the most keys it prints")
				return action{
					check: func() error {
						if listStates[*state] == nil || *limit <= 0 || *since < 0 {
							return cli.Usagef("keys list: --state must be unknown, in-flight or failed, --limit positive and --since not negative")
						}
						return nil
					},
					run: func(ks *keyStore) error {
						if !ks.store.Capabilities().Search {
							return fmt.Errorf("the %s key store cannot list keys", ks.db.Kind)
						}
						return keysList(ctx, ks.store, ks.upstreams, *state, *since, *limit, stdout)
					},
				}
			}),
		"show": sub("show", "idem-gateway keys show --scope SCOPE --key KEY [--db URL]\n\nPrints a key's state as JSON; never a request or response body.",
			func(fs *flag.FlagSet) action {
				ref := keyFlags(fs)
				return action{
					check: func() error {
						if ref.Scope == "" || ref.Key == "" {
							return cli.Usagef("keys show: --scope and --key are required")
						}
						return nil
					},
					run: func(ks *keyStore) error {
						return withResolver(ks, func(r store.Store) error { return keysShow(ctx, r, ks.upstreams, *ref, stdout) })
					},
				}
			}),
		"resolve": sub("resolve", "idem-gateway keys resolve --scope SCOPE --key KEY (--reopen | --status CODE [--body-file FILE] [--location URL]) --reason TEXT [--db URL]\n\nResolves a key whose upstream outcome is unknown, once you know what the upstream did.",
			func(fs *flag.FlagSet) action {
				ref := keyFlags(fs)
				reopen := fs.Bool("reopen", false, "reopen the key: its next retry is sent upstream afresh (the upstream did not act)")
				cli.Alias(fs, "release", "reopen")
				status := fs.Int("status", 0, "the status code the upstream answered, stored for every retry (2xx, or a final 4xx)")
				bodyFile := fs.String("body-file", "", "the file holding the upstream's answer body; - for standard input; none: an empty body")
				contentType := fs.String("content-type", "application/json", "the answer's Content-Type")
				location := fs.String("location", "", "the answer's Location header, if it had one: the resource it names is recorded too")
				reason := fs.String("reason", "", "why, for the audit log (the upstream's log line, a ticket): required, at most 500 characters")
				var answer *store.Response
				return action{
					check: func() error {
						if ref.Scope == "" || ref.Key == "" {
							return cli.Usagef("keys resolve: --scope and --key are required")
						}
						if *reopen == (*status != 0) {
							return cli.Usagef("keys resolve: give either --reopen or --status")
						}
						if !*reopen {
							resp, err := operatorAnswer(*status, *bodyFile, *contentType, *location)
							if err != nil {
								return err
							}
							answer = &resp
						}
						if err := store.CheckReason(*reason); err != nil {
							return cli.Usagef("keys resolve: --reason: %s", invalid(err))
						}
						return nil
					},
					run: func(ks *keyStore) error {
						return withResolver(ks, func(r store.Store) error {
							return keysResolve(ctx, r, resolution{ref: *ref, answer: answer, reason: *reason}, stdout, logger)
						})
					},
				}
			}),
		"sweep": sub("sweep", "idem-gateway keys sweep [--db URL] [--batch-size N] [--pause DURATION]\n\nDeletes every record past its retention, in bounded batches, once, and prints {\"deleted\":N}.",
			func(fs *flag.FlagSet) action {
				batch := fs.Int("batch-size", sweeper.DefaultBatchSize, "the most records one batch deletes, in one short transaction")
				pause := fs.Duration("pause", sweeper.DefaultPause, "the wait between two batches")
				return action{
					check: func() error {
						if *batch <= 0 || *pause < 0 {
							return cli.Usagef("keys sweep: --batch-size must be positive and --pause not negative, got %d and %v", *batch, *pause)
						}
						return nil
					},
					run: func(ks *keyStore) error {
						return keysSweep(ctx, ks, sweeper.Config{BatchSize: *batch, Pause: *pause}, stdout, logger)
					},
				}
			}),
	})
}

// action is a keys subcommand's work: check its flags, then run on the
// key store.
type action struct {
	check func() error
	run   func(ks *keyStore) error
}

// migrateCmd applies the key table's pending migrations; serve does the
// same at start, this is for deploys that migrate first.
func migrateCmd(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	db := fs.String("db", "", "the key store, as serve's --db (default $DATABASE_URL, else "+defaultDB+")")
	config := fs.String("config", "", "serve's configuration file: its db, unless --db is given")
	citus := fs.Bool("citus", false, "then distribute the key table by scope on a Citus coordinator, its audit log a reference table\n(docs/operations.md, \"Running on Citus\"); tables already distributed are left alone")
	if err := cli.ParseFlags(fs, args, stdout, "idem-gateway", "idem-gateway migrate [--db URL] [--citus]\n\nCreates or upgrades the key table."); err != nil {
		return err
	}
	ks, err := openKeys(ctx, *db, *config, getenv)
	if err != nil {
		return err
	}
	defer ks.close()
	applied, err := ks.migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", ks.db, err)
	}
	if _, err := fmt.Fprintf(stdout, "idem-gateway: applied migrations %v (%s %s)\n", applied, ks.db.Kind, ks.db); err != nil || !*citus {
		return err
	}
	if ks.distribute == nil {
		return fmt.Errorf("--citus is for PostgreSQL with the citus extension, not %s", ks.db.Kind)
	}
	tables, err := ks.distribute(ctx)
	if err != nil {
		return fmt.Errorf("distribute %s: %w", ks.db, err)
	}
	return cli.PrintDistributed(stdout, "idem-gateway", tables)
}

// openKeys opens the key store of --db, else of the configuration file,
// else of $DATABASE_URL, migrated.
// The configuration file's upstreams name each key's upstream in what the
// keys commands print.
func openKeys(ctx context.Context, db, config string, getenv func(string) string) (*keyStore, error) {
	var ups []*upstream
	if config != "" {
		s, err := readSettings(config)
		if err == nil {
			ups, err = parseUpstreams(s.Upstreams)
		}
		if err != nil {
			return nil, cli.Usagef("--config %s: %v", config, err)
		}
		if db == "" {
			db = s.DB
		}
	}
	d, err := dburl.Resolve(db, getenv, defaultDB)
	if err != nil {
		return nil, err
	}
	ks, _, err := openMigrated(ctx, d)
	if ks != nil {
		ks.upstreams = ups
	}
	return ks, err
}

func keysSweep(ctx context.Context, ks *keyStore, cfg sweeper.Config, stdout io.Writer, logger *slog.Logger) error {
	if !ks.store.Capabilities().Sweep {
		return fmt.Errorf("the %s key store cannot sweep", ks.db.Kind)
	}
	sw, err := sweeper.New(ks.store, cfg)
	if err != nil {
		return cli.Usagef("keys sweep: %v", err)
	}
	n, err := sw.Once(ctx)
	if err != nil {
		return fmt.Errorf("keys sweep: deleted %d, then: %w", n, err)
	}
	logger.Info("keys swept", "deleted", n)
	return printJSON(stdout, struct {
		Deleted int `json:"deleted"`
	}{n})
}

func keyFlags(fs *flag.FlagSet) *store.KeyRef {
	var ref store.KeyRef
	fs.StringVar(&ref.Scope, "scope", "", "the key's scope, as keys list prints it (required)")
	fs.StringVar(&ref.Key, "key", "", "the client's Idempotency-Key (required)")
	return &ref
}

// withResolver runs fn on the key store, which must resolve keys.
func withResolver(ks *keyStore, fn func(store.Store) error) error {
	if !ks.store.Capabilities().Resolve {
		return fmt.Errorf("the %s key store cannot list or resolve keys: use PostgreSQL, MySQL or SQLite", ks.db.Kind)
	}
	return fn(ks.store)
}

// keyState is what the keys commands print of a record: its state, never
// a request or response body.
type keyState struct {
	Scope          string    `json:"scope"`
	Key            string    `json:"key"`
	Status         string    `json:"status"`
	OutcomeUnknown bool      `json:"outcome_unknown"`
	Attempts       int       `json:"attempts"`
	Request        string    `json:"request"`
	CreatedAt      time.Time `json:"created_at"`
	ClaimedAt      time.Time `json:"claimed_at"`
	LeaseLive      bool      `json:"lease_live"`
	ExpiresAt      time.Time `json:"expires_at"`
	CompletedAt    time.Time `json:"completed_at,omitzero"` // absent until the response is stored
	ResponseCode   int       `json:"response_code,omitempty"`
	// ForwardedKey is the Idempotency-Key the gateway sent upstream
	// (derivedKey): what to search the upstream's logs for.
	ForwardedKey string `json:"forwarded_key"`
	// Upstream serves the request's path (by --config's upstreams).
	Upstream string `json:"upstream,omitempty"`
	// Cause is why the outcome is unknown, as stored with it.
	Cause string `json:"cause,omitempty"`
}

func stateOf(rec *store.Record, ups []*upstream) keyState {
	d := detailOf(rec, ups)
	s := keyState{
		ForwardedKey: d.ForwardedKey, Upstream: d.Upstream, Cause: d.Cause,
		Scope: rec.Scope, Key: rec.Key, Status: string(rec.Status), OutcomeUnknown: outcomeUnknown(rec),
		Attempts: rec.Attempts, Request: rec.Fingerprint.Method + " " + rec.Fingerprint.Path,
		CreatedAt: rec.CreatedAt.UTC(), ClaimedAt: rec.ClaimedAt.UTC(), LeaseLive: rec.LeaseLive, ExpiresAt: rec.ExpiresAt.UTC(),
		CompletedAt: rec.CompletedAt.UTC(),
	}
	if rec.Response != nil {
		s.ResponseCode = rec.Response.StatusCode
	}
	return s
}

// outcomeUnknown reports whether rec holds the gateway's stored
// outcome-unknown answer: store.AwaitsOperator, the test the stores' sweep
// and re-acquire make, so that every record they keep for an operator is
// one keys list shows and keys resolve settles.
func outcomeUnknown(rec *store.Record) bool {
	return store.AwaitsOperator(rec.Status, rec.Response)
}

// isOutcomeUnknown reports whether resp is the outcome-unknown answer:
// the one answer an operator may still change (keys resolve), so the one
// the replay cache never keeps.
func isOutcomeUnknown(resp store.Response) bool {
	return store.AwaitsOperator(store.StatusCompleted, &resp)
}

// The states keys list selects, as the console names them: an unknown
// outcome is a COMPLETED record holding the outcome-unknown answer; a key
// in flight is claimed and not completed (PROCESSING, its lease live or
// run out); a failed key was freed for a retry (FAILED).
const (
	stateUnknown  = "unknown"
	stateInFlight = "in-flight"
	stateFailed   = "failed"
)

// listStates are the searches of keys list, by state, and whether a
// record found is in it.
var listStates = map[string]*struct {
	query func(limit int) store.KeyQuery
	is    func(*store.Record) bool
}{
	stateUnknown: {
		// The gateway's answer is a 409: the search reads the partial
		// index of 4xx answers; the upstream's own 409s are left out.
		func(limit int) store.KeyQuery {
			return store.KeyQuery{Status: store.StatusCompleted, ResponseCode: http.StatusConflict, Limit: limit}
		},
		outcomeUnknown,
	},
	stateInFlight: {
		func(limit int) store.KeyQuery { return store.KeyQuery{Status: store.StatusProcessing, Limit: limit} },
		func(*store.Record) bool { return true },
	},
	stateFailed: {
		func(limit int) store.KeyQuery { return store.KeyQuery{Status: store.StatusFailed, Limit: limit} },
		func(*store.Record) bool { return true },
	},
}

// keysList prints the keys in state first used within since (0: any),
// newest first, at most limit, one a line. It pages by age, so a key
// first used in the same microsecond as the last of a page may be missed.
func keysList(ctx context.Context, l store.Store, ups []*upstream, state string, since time.Duration, limit int, stdout io.Writer) error {
	const page = 100
	st := listStates[state]
	var cutoff time.Time
	if since > 0 {
		cutoff = time.Now().Add(-since)
	}
	q := st.query(min(limit, page))
	for n := 0; n < limit; {
		recs, err := l.ListKeys(ctx, q)
		if err != nil {
			return fmt.Errorf("keys list: %w", err)
		}
		for i := range recs {
			rec := &recs[i]
			if !cutoff.IsZero() && rec.CreatedAt.Before(cutoff) {
				return nil // newest first: every later one is older
			}
			if !st.is(rec) {
				continue // the upstream's own 409
			}
			if err := printJSON(stdout, stateOf(rec, ups)); err != nil {
				return err
			}
			if n++; n == limit {
				return nil
			}
		}
		if len(recs) < q.Limit {
			return nil
		}
		q.CreatedBefore = recs[len(recs)-1].CreatedAt
	}
	return nil
}

func keysShow(ctx context.Context, r store.Store, ups []*upstream, ref store.KeyRef, stdout io.Writer) error {
	rec, err := r.Get(ctx, ref.Scope, ref.Key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("keys show: no record for key %q in scope %s (never used, or swept after its retention)", ref.Key, ref.Scope)
	}
	if err != nil {
		return fmt.Errorf("keys show: %w", err)
	}
	return printJSON(stdout, stateOf(rec, ups))
}

// operatorAnswer is the upstream's real answer as the operator gives it,
// checked as every door checks it (store.CheckAnswer).
func operatorAnswer(status int, bodyFile, contentType, location string) (store.Response, error) {
	resp := store.Response{StatusCode: status, Header: http.Header{}, Body: []byte{}}
	var err error
	switch bodyFile {
	case "":
	case "-":
		resp.Body, err = io.ReadAll(os.Stdin)
	default:
		resp.Body, err = os.ReadFile(bodyFile)
	}
	if err != nil {
		return store.Response{}, fmt.Errorf("keys resolve: read the body: %w", err)
	}
	if len(resp.Body) > 0 && contentType != "" {
		resp.Header.Set("Content-Type", contentType)
	}
	if location != "" {
		resp.Header.Set("Location", location)
		resp.ResourceType, resp.ResourceID = idem.ResourceOf(location)
	}
	if err := store.CheckAnswer(resp); err != nil {
		return store.Response{}, cli.Usagef("keys resolve: %s", invalid(err))
	}
	return resp, nil
}

// invalid is what an action store.ErrInvalidAction refused says, without
// the sentinel's prefix.
func invalid(err error) string {
	return strings.TrimPrefix(err.Error(), store.ErrInvalidAction.Error()+": ")
}

// resolution is an operator's decision on one key: reopen it (answer
// nil), or store answer for it; reason goes to the audit log.
type resolution struct {
	ref    store.KeyRef
	answer *store.Response
	reason string
}

// keysResolve reopens an outcome-unknown key or stores the answer for it,
// and appends the audit entry in the same transaction, as the console's
// actions do. The write is fenced on the token the record was read with:
// if a retry or another operator changed the record meanwhile, nothing
// changes.
func keysResolve(ctx context.Context, r store.Store, res resolution, stdout io.Writer, logger *slog.Logger) error {
	ref := res.ref
	if !r.Capabilities().AuditLog {
		return fmt.Errorf("keys resolve: the key store keeps no audit log")
	}
	rec, err := r.Get(ctx, ref.Scope, ref.Key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("keys resolve: no record for key %q in scope %s", ref.Key, ref.Scope)
	}
	if err != nil {
		return fmt.Errorf("keys resolve: %w", err)
	}
	if !outcomeUnknown(rec) {
		return fmt.Errorf("keys resolve: key %q in scope %s is %s, not an unknown outcome: nothing changed", ref.Key, ref.Scope, rec.Status)
	}
	what := "reopened"
	if res.answer != nil {
		what = "answered"
	}
	err = store.Resolve(ctx, r, rec, res.answer, func(after *store.Record) store.AuditEntry {
		return store.AuditEntry{
			Actor: "idem-gateway keys resolve, " + operator(), Action: "resolve: " + what, Reason: res.reason,
			Scope: rec.Scope, Key: rec.Key,
			Before: store.DescribeRecord(rec, "outcome unknown"), After: store.DescribeRecord(after, ""),
		}
	})
	if errors.Is(err, store.ErrNotHeld) {
		return fmt.Errorf("keys resolve: the record changed while it was being resolved (a retry took the key over, or another operator resolved it); nothing changed: show it again")
	}
	if err != nil {
		return fmt.Errorf("keys resolve: %w", err)
	}
	attrs := []any{"scope", rec.Scope, "key_hash", keyHash(rec.Key), "resolution", what}
	if res.answer != nil {
		attrs = append(attrs, "status", res.answer.StatusCode)
	}
	logger.Info("key resolved", attrs...)
	return printJSON(stdout, struct {
		Scope      string `json:"scope"`
		Key        string `json:"key"`
		Resolution string `json:"resolution"`
	}{rec.Scope, rec.Key, what})
}

// operator names who runs the command, for the audit log: the user and
// the host, as the system knows them.
func operator() string {
	name := "unknown user"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		name += "@" + h
	}
	return name
}

func printJSON(w io.Writer, v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
