package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// Progress reads the record's recovery point and life in one statement fenced
// by a's token.
func (k keys) Progress(ctx context.Context, a store.Attempt) (store.Progress, error) {
	var (
		p        store.Progress
		provider *string
	)
	err := k.db.QueryRow(ctx, k.sql.selectPhase, a.Scope, a.Key, a.Token).Scan(&p.Point, &p.Life, &provider)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Progress{}, fmt.Errorf("phase: %w", store.ErrNotHeld)
	case err != nil:
		return store.Progress{}, fmt.Errorf("phase: %w", translate(err))
	}
	if p.ProviderKeys, err = keytable.DecodeProviderKeys(provider); err != nil {
		return store.Progress{}, fmt.Errorf("phase: %w", err)
	}
	return p, nil
}

// Advance sets the recovery point and records provider keys, fenced by a's
// token.
func (k keys) Advance(ctx context.Context, a store.Attempt, point string, providerKeys map[string]string) error {
	if point == "" {
		return errors.New("pgstore: advance: the recovery point is empty")
	}
	return k.fenced(ctx, "advance", k.sql.advance, a.Scope, a.Key, a.Token, point, keytable.EncodeProviderKeys(providerKeys))
}

// FindUnfinished lists abandoned unfinished records (store.UnfinishedFinder).
func (s *Store) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	if err := engine.CheckLimit("pgstore", "find unfinished", limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql.findUnfinished, limit)
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Unfinished, error) { return engine.ScanUnfinished(row) })
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", translate(err))
	}
	return out, nil
}

// ResumeUnfinished takes over the unfinished record prevToken last held,
// only while it is still that abandoned unfinished record
// (store.UnfinishedFinder).
func (s *Store) ResumeUnfinished(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	tag, err := s.bounded(ctx, s.sql.resumeUnfinished, c.Scope, c.Key, c.Token,
		c.Lease.Microseconds(), c.TTL.Microseconds(), prevToken)
	if err != nil {
		return false, fmt.Errorf("resume unfinished: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
