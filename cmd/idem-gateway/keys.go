package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// keysCmd dispatches "idem-gateway keys list|show|resolve": the operator's
// view of the keys whose upstream outcome is unknown, and their resolution
// once the operator has found out what the upstream did.
func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("keys: want list, show or resolve (idem-gateway keys COMMAND -h)")
	}
	fs := flag.NewFlagSet("idem-gateway keys "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var db string
	dbFlag(fs, &db)
	switch args[0] {
	case "list":
		limit := fs.Int("limit", 100, "the most keys it prints")
		if err := parseArgs(fs, args[1:]); err != nil {
			return err
		}
		if *limit <= 0 {
			return usageError("keys list: --limit must be positive")
		}
		return withResolver(ctx, db, func(r store.KeyResolver) error { return keysList(ctx, r, *limit, stdout) })
	case "show":
		ref := keyFlags(fs)
		if err := parseArgs(fs, args[1:]); err != nil {
			return err
		}
		if ref.Scope == "" || ref.Key == "" {
			return usageError("keys show: --scope and --key are required")
		}
		return withResolver(ctx, db, func(r store.KeyResolver) error { return keysShow(ctx, r, *ref, stdout) })
	case "resolve":
		ref := keyFlags(fs)
		release := fs.Bool("release", false, "release the key: its next retry is sent upstream afresh")
		status := fs.Int("status", 0, "the status code the upstream answered, stored for every retry (2xx, or a final 4xx)")
		bodyFile := fs.String("body-file", "", "the file holding the upstream's answer body; - for standard input; none: an empty body")
		contentType := fs.String("content-type", "application/json", "the answer's Content-Type")
		location := fs.String("location", "", "the answer's Location header, if it had one")
		if err := parseArgs(fs, args[1:]); err != nil {
			return err
		}
		if ref.Scope == "" || ref.Key == "" {
			return usageError("keys resolve: --scope and --key are required")
		}
		if *release == (*status != 0) {
			return usageError("keys resolve: give either --release or --status")
		}
		var answer *store.Response
		if !*release {
			resp, err := operatorAnswer(*status, *bodyFile, *contentType, *location)
			if err != nil {
				return err
			}
			answer = &resp
		}
		return withResolver(ctx, db, func(r store.KeyResolver) error { return keysResolve(ctx, r, *ref, answer, stdout) })
	}
	return usageError(fmt.Sprintf("unknown keys command %q: want list, show or resolve", args[0]))
}

func keyFlags(fs *flag.FlagSet) *store.KeyRef {
	var ref store.KeyRef
	fs.StringVar(&ref.Scope, "scope", "", "the key's scope: the SHA-256 of the scope header's value, as keys list prints it (required)")
	fs.StringVar(&ref.Key, "key", "", "the client's Idempotency-Key (required)")
	return &ref
}

// withResolver runs fn on the key store at db.
func withResolver(ctx context.Context, db string, fn func(store.KeyResolver) error) error {
	s, closeStore, err := openStore(ctx, db, io.Discard) // the serving gateway warns about durability
	if err != nil {
		return err
	}
	defer closeStore()
	r, ok := s.(store.KeyResolver)
	if !ok {
		return fmt.Errorf("the key store %T cannot resolve keys", s)
	}
	return fn(r)
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
	ResponseCode   int       `json:"response_code,omitempty"`
}

func stateOf(rec *store.Record) keyState {
	s := keyState{
		Scope: rec.Scope, Key: rec.Key, Status: string(rec.Status), OutcomeUnknown: outcomeUnknown(rec),
		Attempts: rec.Attempts, Request: rec.Fingerprint.Method + " " + rec.Fingerprint.Path,
		CreatedAt: rec.CreatedAt.UTC(), ClaimedAt: rec.ClaimedAt.UTC(), LeaseLive: rec.LeaseLive, ExpiresAt: rec.ExpiresAt.UTC(),
	}
	if rec.Response != nil {
		s.ResponseCode = rec.Response.StatusCode
	}
	return s
}

// outcomeUnknown reports whether rec holds the gateway's stored
// outcome-unknown answer.
func outcomeUnknown(rec *store.Record) bool {
	if rec.Status != store.StatusCompleted || rec.Response == nil || rec.Response.StatusCode != http.StatusConflict {
		return false
	}
	var p struct{ Type string }
	return json.Unmarshal(rec.Response.Body, &p) == nil && p.Type == idem.DefaultProblemTypeBase+problemOutcomeUnknown
}

// keysList prints the outcome-unknown keys, at most limit, one a line.
func keysList(ctx context.Context, r store.KeyResolver, limit int, stdout io.Writer) error {
	const page = 100
	after, n := store.KeyRef{}, 0
	for n < limit {
		refs, err := r.ListCompleted(ctx, http.StatusConflict, after, page)
		if err != nil {
			return fmt.Errorf("keys list: %w", err)
		}
		for _, ref := range refs {
			rec, err := r.Get(ctx, ref.Scope, ref.Key)
			if errors.Is(err, store.ErrNotFound) {
				continue // swept meanwhile
			}
			if err != nil {
				return fmt.Errorf("keys list: %w", err)
			}
			if !outcomeUnknown(rec) {
				continue // the upstream's own 409
			}
			if err := printJSON(stdout, stateOf(rec)); err != nil {
				return err
			}
			if n++; n == limit {
				break
			}
		}
		if len(refs) < page {
			break
		}
		after = refs[len(refs)-1]
	}
	return nil
}

func keysShow(ctx context.Context, r store.KeyResolver, ref store.KeyRef, stdout io.Writer) error {
	rec, err := r.Get(ctx, ref.Scope, ref.Key)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("keys show: no record for key %q in scope %s (never used, or swept after its retention)", ref.Key, ref.Scope)
	}
	if err != nil {
		return fmt.Errorf("keys show: %w", err)
	}
	return printJSON(stdout, stateOf(rec))
}

// operatorAnswer is the upstream's real answer as the operator gives it.
func operatorAnswer(status int, bodyFile, contentType, location string) (store.Response, error) {
	if status < 200 || status > 499 || (status >= 300 && status < 400) || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests {
		return store.Response{}, usageError(fmt.Sprintf("keys resolve: --status %d: want a final answer, 2xx or 4xx other than 408 and 429", status))
	}
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
	}
	return resp, nil
}

// keysResolve releases an outcome-unknown key (answer nil) or stores answer
// for it. The write is fenced on the token the record was read with: if a
// retry or another operator changed the record meanwhile, nothing changes.
func keysResolve(ctx context.Context, r store.KeyResolver, ref store.KeyRef, answer *store.Response, stdout io.Writer) error {
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
	a := store.Attempt{Scope: rec.Scope, Key: rec.Key, Token: rec.Token}
	resolution := "released"
	if answer == nil {
		err = r.Release(ctx, a)
	} else {
		resolution = "answered"
		err = r.ReplaceResponse(ctx, a, *answer)
	}
	if errors.Is(err, store.ErrNotHeld) {
		return fmt.Errorf("keys resolve: the record changed while it was being resolved (a retry took the key over, or another operator resolved it); nothing changed: show it again")
	}
	if err != nil {
		return fmt.Errorf("keys resolve: %w", err)
	}
	return printJSON(stdout, struct {
		Scope      string `json:"scope"`
		Key        string `json:"key"`
		Resolution string `json:"resolution"`
	}{rec.Scope, rec.Key, resolution})
}

func printJSON(w io.Writer, v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}
