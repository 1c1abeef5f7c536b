package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/keytable"
	"github.com/idem-dev/idem/store"
)

var (
	_ store.Phaser           = (*Store)(nil)
	_ store.Phaser           = (*Tx)(nil)
	_ store.UnfinishedFinder = (*Store)(nil)
)

// selectPhase reads the recovery point and the life together, fenced by
// the token: model/payout.pml's fenced read (rule 5 of docs/model.md).
const selectPhase = `
SELECT coalesce(recovery_point, ''), created_at, provider_keys::text
  FROM idempotency_keys
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`

// Phase reads the record's recovery point and life in one statement fenced
// by a's token.
func (k keys) Phase(ctx context.Context, a store.Attempt) (store.Phase, error) {
	var (
		p        store.Phase
		provider *string
	)
	err := k.db.QueryRow(ctx, k.sql.selectPhase, a.Scope, a.Key, a.Token).Scan(&p.Point, &p.Life, &provider)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Phase{}, fmt.Errorf("phase: %w", store.ErrLeaseLost)
	case err != nil:
		return store.Phase{}, fmt.Errorf("phase: %w", translate(err))
	}
	if p.ProviderKeys, err = keytable.DecodeProviderKeys(provider); err != nil {
		return store.Phase{}, fmt.Errorf("phase: %w", err)
	}
	return p, nil
}

// advance merges the new provider keys under the recorded ones: jsonb's
// || keeps its right operand's value of a key both have.
const advance = `
UPDATE idempotency_keys
   SET recovery_point = $4,
       provider_keys = CASE WHEN $5::text IS NULL THEN provider_keys
                            ELSE $5::text::jsonb || coalesce(provider_keys, '{}'::jsonb) END
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $3 AND status = 'PROCESSING'`

// Advance sets the recovery point and records provider keys, fenced by a's
// token.
func (k keys) Advance(ctx context.Context, a store.Attempt, point string, providerKeys map[string]string) error {
	if point == "" {
		return errors.New("pgstore: advance: the recovery point is empty")
	}
	return k.fenced(ctx, "advance", k.sql.advance, a.Scope, a.Key, a.Token, point, keytable.EncodeProviderKeys(providerKeys))
}

// findUnfinished reads the partial index idempotency_keys_unfinished_idx.
const findUnfinished = `
SELECT user_id, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
       recovery_point, lock_token::text
  FROM idempotency_keys
 WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED'
   AND (status = 'FAILED' OR lock_expires_at <= now())
 ORDER BY locked_at
 LIMIT $1`

// FindUnfinished lists abandoned unfinished records (store.UnfinishedFinder).
func (s *Store) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pgstore: find unfinished: limit must be positive, got %d", limit)
	}
	rows, err := s.pool.Query(ctx, s.sql.findUnfinished, limit)
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Unfinished, error) {
		var u store.Unfinished
		fp := &u.Fingerprint
		err := row.Scan(&u.Scope, &u.Key, &fp.Method, &fp.Path, &fp.Hash, &fp.Version, &u.Point, &u.Token)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", translate(err))
	}
	return out, nil
}

// resumeUnfinished is reacquire for the completer: fenced by the listed
// token and by the record still being abandoned and unfinished, it keeps
// the record's fingerprint and life (model/payout.pml's Completer).
const resumeUnfinished = `
UPDATE idempotency_keys
   SET status = 'PROCESSING', attempts = attempts + 1,
       expires_at = GREATEST(expires_at, now() + $5 * interval '1 microsecond'),
       lock_token = $3, locked_at = now(), lock_expires_at = now() + $4 * interval '1 microsecond'
 WHERE user_id = $1 AND idempotency_key = $2 AND lock_token = $6
   AND recovery_point IS NOT NULL
   AND (status = 'FAILED' OR (status = 'PROCESSING' AND lock_expires_at <= now()))`

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
