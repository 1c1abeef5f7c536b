// Package completer finishes operations that their requests abandoned: a
// leased-mode handler split into phases (idem.Advance) whose attempt was
// killed, lost its lease, or answered idem.Pending, leaving its record
// unfinished at a recovery point. The client may never retry; a completer
// finishes the operation without it.
//
//	c, err := completer.New(mw, store, resume, completer.Config{}) // pgstore or sqlitestore
//	go c.Run(ctx)                                                  // every replica may run one
//
// Each round lists abandoned unfinished records (store.Store.FindUnfinished)
// and takes each one through the middleware's own path (idem.Middleware.Do)
// with the record's fingerprint and the token it was listed with
// (idem.Call.Resumes): the same lease and fencing as any attempt, so one
// attempt at a time holds an operation, whether it is a client's retry or
// a completer's, on any replica. The take-over is one statement fenced by
// that token: a record finished, re-acquired or swept since the listing is
// left alone, never claimed afresh nor started in a new life. The
// application's Resume function then runs as the handler would, with
// idem.RecoveryPoint, idem.ProviderKey and idem.Advance; its response is stored as the
// key's answer, which the client's retry then gets. model/payout.pml
// models this as its Completer process.
package completer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// Defaults of Config.
const (
	DefaultInterval  = 5 * time.Second
	DefaultBatchSize = 100
)

// Config configures a Completer. Its zero value is valid; every field
// documents its default.
type Config struct {
	// Interval is the time from the end of one round of Run to the start of
	// the next. Default 5s.
	Interval time.Duration
	// BatchSize is the most records one round takes up. Default 100.
	BatchSize int
	// Logger, when set, gets one record per round that resumed something
	// (Info) or failed (Error), never a body. Default none.
	Logger *slog.Logger
}

// Resume finishes an unfinished operation. It runs as the operation's
// handler, on the key's hold: ctx carries the request's transaction and
// the recovery point (idem.RecoveryPoint, idem.ProviderKey, idem.Advance,
// idem.Pending). Its idem.Response is the key's answer, stored when final and the
// operation not Pending. It must resume from the point alone, never from a
// request body, which the store does not keep: look the operation up by
// what its first phase wrote (by idem.ProviderKey, say).
type Resume func(ctx context.Context, u store.Unfinished) idem.Response

// Route labels the Events of the attempts a completer makes.
const Route = "completer"

// Completer resumes abandoned operations.
type Completer struct {
	mw     *idem.Middleware
	finder store.Store
	resume Resume
	cfg    Config
}

// New returns a Completer that resumes, through mw, the unfinished records
// of finder (the store mw runs on), which must list them
// (store.Capabilities.Unfinished). mw must be in leased mode. It fails on
// an invalid Config, never later.
func New(mw *idem.Middleware, finder store.Store, resume Resume, cfg Config) (*Completer, error) {
	switch {
	case mw == nil:
		return nil, errors.New("completer: New needs a middleware")
	case finder == nil:
		return nil, errors.New("completer: New needs a store")
	case !finder.Capabilities().Unfinished:
		return nil, errors.New("completer: the store cannot list unfinished records (store.Capabilities.Unfinished)")
	case resume == nil:
		return nil, errors.New("completer: New needs a Resume function")
	case mw.Config().Mode != idem.ModeLeased:
		return nil, fmt.Errorf("completer: the middleware is in %s mode; recovery points need leased mode", mw.Config().Mode)
	}
	switch {
	case cfg.Interval == 0:
		cfg.Interval = DefaultInterval
	case cfg.Interval < 0:
		return nil, fmt.Errorf("completer: Interval must be positive, got %v", cfg.Interval)
	}
	switch {
	case cfg.BatchSize == 0:
		cfg.BatchSize = DefaultBatchSize
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("completer: BatchSize must be positive, got %d", cfg.BatchSize)
	}
	return &Completer{mw: mw, finder: finder, resume: resume, cfg: cfg}, nil
}

// Round is what one round did.
type Round struct {
	Found int // abandoned unfinished records listed
	// Finished is how many got a final answer stored in this round.
	Finished int
	// Outcomes counts the round's attempts by outcome: Executed (resumed
	// to a final answer), Failed (resumed, still pending or a retriable
	// answer), Replayed (another attempt had finished it meanwhile),
	// InFlight (another attempt holds it, or took it over since the
	// listing), and so on.
	Outcomes map[idem.Outcome]int
}

// RunOnce runs one round: it lists up to BatchSize abandoned unfinished
// records and resumes each, one after another. The error is the listing's;
// an attempt that fails is counted in Outcomes and left for the next
// round.
func (c *Completer) RunOnce(ctx context.Context) (Round, error) {
	found, err := c.finder.FindUnfinished(ctx, c.cfg.BatchSize)
	if err != nil {
		return Round{}, fmt.Errorf("completer: %w", err)
	}
	r := Round{Found: len(found), Outcomes: map[idem.Outcome]int{}}
	for _, u := range found {
		if ctx.Err() != nil {
			break
		}
		res := c.Resume(ctx, u)
		r.Outcomes[res.Outcome]++
		if res.Outcome == idem.OutcomeExecuted {
			r.Finished++
		}
	}
	return r, nil
}

// Resume makes one attempt at u now, as a round would: an operator's
// "retry now". The take-over is fenced by u.Token, so a record finished,
// re-acquired or held by another attempt since u was read is left alone
// (OutcomeInFlight, OutcomeReplayed).
func (c *Completer) Resume(ctx context.Context, u store.Unfinished) idem.Result {
	return c.mw.Do(ctx, idem.Call{
		Scope: u.Scope, Key: quote(u.Key), Fingerprint: u.Fingerprint,
		Method: u.Fingerprint.Method, Route: Route, Resumes: u.Token,
	}, func(ctx context.Context) idem.Response { return c.attempt(ctx, u) })
}

// attempt resumes u on the key's hold, at the point the fenced read finds:
// the hold is on the record as listed, unfinished.
func (c *Completer) attempt(ctx context.Context, u store.Unfinished) idem.Response {
	point, err := idem.RecoveryPoint(ctx)
	if err != nil {
		// Not final: nothing is stored, and the key is freed.
		return idem.Response{StatusCode: http.StatusServiceUnavailable}
	}
	u.Point = point
	return c.resume(ctx, u)
}

// Run runs a round every Interval until ctx ends, and returns ctx's error.
func (c *Completer) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		r, err := c.RunOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			c.log(ctx, slog.LevelError, "completer round failed", slog.Any("err", err))
		case r.Found > 0:
			c.log(ctx, slog.LevelInfo, "completer round", slog.Int("found", r.Found), slog.Int("finished", r.Finished))
		}
		t.Reset(c.cfg.Interval)
	}
}

func (c *Completer) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
	}
}

// quote spells a stored key as an RFC 8941 string, which idem.ParseKey
// reads back as the same key whatever its characters.
func quote(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}
