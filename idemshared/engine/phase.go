package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// Progress reads the record's recovery point and life in one statement
// fenced by a's token: model/payout.pml's fenced read (rule 5 of
// docs/model.md).
func (k Keys) Progress(ctx context.Context, a store.Attempt) (store.Progress, error) {
	var (
		p        store.Progress
		provider sql.NullString
	)
	s := k.e.sql.Phase
	err := k.run(ctx, OpRead, func(q Executor, now time.Time) error {
		return q.QueryRow(ctx, s.SQL, k.e.args(s, now, a.Scope, a.Key, a.Token)...).Scan(&p.Point, k.e.timeDest(&p.Life), &provider)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Progress{}, fmt.Errorf("phase: %w", store.ErrNotHeld)
	case err != nil:
		return store.Progress{}, fmt.Errorf("phase: %w", err)
	}
	if provider.Valid {
		if p.ProviderKeys, err = keytable.DecodeProviderKeys(&provider.String); err != nil {
			return store.Progress{}, fmt.Errorf("phase: %w", err)
		}
	}
	return p, nil
}

// Advance sets the recovery point and records provider keys, fenced by a's
// token; in a Tx it commits with the transaction.
func (k Keys) Advance(ctx context.Context, a store.Attempt, point string, providerKeys map[string]string) error {
	if point == "" {
		return fmt.Errorf("%s: advance: the recovery point is empty", k.e.name)
	}
	return k.fenced(ctx, "advance", k.e.sql.Advance, a, a.Scope, a.Key, a.Token, point, keytable.EncodeProviderKeys(providerKeys))
}

// FindUnfinished lists abandoned unfinished records
// (store.Capabilities.Unfinished).
func (e *Engine) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	if err := CheckLimit(e.name, "find unfinished", limit); err != nil {
		return nil, err
	}
	f := e.sql.FindUnfinished
	out, err := collect(ctx, e.pool, f.SQL, e.args(f, e.now(), limit), scanUnfinished)
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", e.Translate(err))
	}
	return out, nil
}
