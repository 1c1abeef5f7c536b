package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

var (
	_ store.Advancer         = (*Store)(nil)
	_ store.Advancer         = (*Tx)(nil)
	_ store.UnfinishedFinder = (*Store)(nil)
)

// selectPhase reads the recovery point and the life together, fenced by
// the token: model/payout.pml's fenced read (rule 5 of docs/model.md).
const selectPhase = `
SELECT coalesce(recovery_point, ''), created_at, provider_keys
  FROM idempotency_keys
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

// Progress reads the record's recovery point and life in one statement fenced
// by a's token.
func (k keys) Progress(ctx context.Context, a store.Attempt) (store.Progress, error) {
	var (
		p        store.Progress
		life     int64
		provider *string
	)
	err := k.s.read(ctx, func(q querier, _ time.Time) error {
		return q.QueryRowContext(ctx, k.sql.selectPhase, sql.Named("scope", a.Scope), sql.Named("key", a.Key),
			sql.Named("token", a.Token)).Scan(&p.Point, &life, &provider)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Progress{}, fmt.Errorf("phase: %w", store.ErrNotHeld)
	case err != nil:
		return store.Progress{}, fmt.Errorf("phase: %w", err)
	}
	p.Life = time.UnixMicro(life).UTC()
	if p.ProviderKeys, err = keytable.DecodeProviderKeys(provider); err != nil {
		return store.Progress{}, fmt.Errorf("phase: %w", err)
	}
	return p, nil
}

// advance merges the new provider keys under the recorded ones:
// json_patch keeps its second operand's value of a key both have.
const advance = `
UPDATE idempotency_keys
   SET recovery_point = :point,
       provider_keys = CASE WHEN :provider_keys IS NULL THEN provider_keys
                            ELSE json_patch(:provider_keys, coalesce(provider_keys, '{}')) END
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'PROCESSING'`

// Advance sets the recovery point and records provider keys, fenced by a's
// token.
func (k keys) Advance(ctx context.Context, a store.Attempt, point string, providerKeys map[string]string) error {
	if point == "" {
		return errors.New("sqlitestore: advance: the recovery point is empty")
	}
	return k.fenced(ctx, "advance", k.sql.advance, a, sql.Named("point", point),
		sql.Named("provider_keys", keytable.EncodeProviderKeys(providerKeys)))
}

// findUnfinished reads the partial index idempotency_keys_unfinished_idx.
const findUnfinished = `
SELECT scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
       recovery_point, fencing_token
  FROM idempotency_keys
 WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED'
   AND (status = 'FAILED' OR lease_expires_at <= :now)
 ORDER BY claimed_at
 LIMIT :limit`

// FindUnfinished lists abandoned unfinished records (store.UnfinishedFinder).
func (s *Store) FindUnfinished(ctx context.Context, limit int) ([]store.Unfinished, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlitestore: find unfinished: limit must be positive, got %d", limit)
	}
	rows, err := s.db.QueryContext(ctx, s.sql.findUnfinished, sql.Named("now", micros(time.Now())), sql.Named("limit", limit))
	if err != nil {
		return nil, fmt.Errorf("find unfinished: %w", translate(err))
	}
	defer rows.Close()
	var out []store.Unfinished
	for rows.Next() {
		var u store.Unfinished
		fp := &u.Fingerprint
		if err := rows.Scan(&u.Scope, &u.Key, &fp.Method, &fp.Path, &fp.Hash, &fp.Version, &u.Point, &u.Token); err != nil {
			return nil, fmt.Errorf("find unfinished: %w", translate(err))
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
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
       expires_at = MAX(expires_at, :now + :ttl),
       fencing_token = :token, claimed_at = :now, lease_expires_at = :now + :lock_for
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :prev_token
   AND recovery_point IS NOT NULL
   AND (status = 'FAILED' OR (status = 'PROCESSING' AND lease_expires_at <= :now))`

// ResumeUnfinished takes over the unfinished record prevToken last held,
// only while it is still that abandoned unfinished record
// (store.UnfinishedFinder).
func (s *Store) ResumeUnfinished(ctx context.Context, c store.Claim, prevToken string) (bool, error) {
	return s.takeOver(ctx, "resume unfinished", s.sql.resumeUnfinished, func(now time.Time) []any {
		return []any{sql.Named("scope", c.Scope), sql.Named("key", c.Key), sql.Named("token", c.Token),
			sql.Named("now", micros(now)), sql.Named("lock_for", c.Lease.Microseconds()),
			sql.Named("ttl", c.TTL.Microseconds()), sql.Named("prev_token", prevToken)}
	})
}
