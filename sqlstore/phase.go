package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

var (
	_ store.Advancer         = (*Store)(nil)
	_ store.Advancer         = (*Tx)(nil)
	_ store.UnfinishedFinder = (*Store)(nil)
)

// Progress reads the record's recovery point and life in one statement fenced
// by a's token: model/payout.pml's fenced read (rule 5 of docs/model.md).
func (k keys) Progress(ctx context.Context, a store.Attempt) (store.Progress, error) {
	q, err := k.s.read(ctx)
	if err != nil {
		return store.Progress{}, fmt.Errorf("phase: %w", err)
	}
	var (
		p        store.Progress
		provider sql.NullString
	)
	s := k.st.sql.phase
	err = q.QueryRowContext(ctx, s.sql, s.args(a.Scope, a.Key, a.Token)...).Scan(&p.Point, dbTime{&p.Life}, &provider)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Progress{}, fmt.Errorf("phase: %w", store.ErrNotHeld)
	case err != nil:
		return store.Progress{}, fmt.Errorf("phase: %w", k.st.translate(err))
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
func (k keys) Advance(ctx context.Context, a store.Attempt, point string, providerKeys map[string]string) error {
	if point == "" {
		return errors.New("sqlstore: advance: the recovery point is empty")
	}
	return k.fenced(ctx, "advance", k.st.sql.advance, a, a.Scope, a.Key, a.Token, point, keytable.EncodeProviderKeys(providerKeys))
}

// FindUnfinished lists abandoned unfinished records (store.UnfinishedFinder).
func (s *Store) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlstore: find unfinished: limit must be positive, got %d", limit)
	}
	rows, err := s.db.QueryContext(ctx, s.sql.findUnfinished.sql, limit)
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", s.translate(err))
	}
	defer rows.Close()
	var out []store.Unfinished
	for rows.Next() {
		var u store.Unfinished
		fp := &u.Fingerprint
		if err := rows.Scan(&u.Scope, &u.Key, &fp.Method, &fp.Path, &fp.Hash, &fp.Version, &u.Point, &u.Token); err != nil {
			return nil, fmt.Errorf("find unfinished: %w", s.translate(err))
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find unfinished: %w", s.translate(err))
	}
	return out, nil
}

// ResumeUnfinished takes over the unfinished record prevToken last held,
// only while it is still that abandoned unfinished record
// (store.UnfinishedFinder).
func (s *Store) ResumeUnfinished(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	return s.takeOver(ctx, "resume unfinished", s.sql.resumeUnfinished, c.Scope, c.Key, c.Token,
		c.Lease.Microseconds(), c.TTL.Microseconds(), prevToken)
}
