package pgstore

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

var _ store.KeyResolver = (*Store)(nil)

// listCompleted walks the primary key in order from after, filtering: an
// operator's scan, stopped at the limit.
const listCompleted = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE status = 'COMPLETED' AND response_code = $1
   AND (scope, idempotency_key) > ($2, $3)
 ORDER BY scope, idempotency_key
 LIMIT $4`

// ListCompleted lists the keys of COMPLETED records whose response has
// status code code (see store.KeyResolver).
func (s *Store) ListCompleted(ctx context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pgstore: list completed: limit must be positive, got %d", limit)
	}
	rows, err := s.pool.Query(ctx, s.sql.listCompleted, code, after.Scope, after.Key, limit)
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", translate(err))
	}
	refs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.KeyRef, error) {
		var k store.KeyRef
		err := row.Scan(&k.Scope, &k.Key)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", translate(err))
	}
	return refs, nil
}

const release = `
UPDATE idempotency_keys
   SET status = 'FAILED',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'COMPLETED'`

// Release marks the COMPLETED record a's token holds FAILED, so that the
// next retry runs afresh (see store.KeyResolver).
func (s *Store) Release(ctx context.Context, a store.Attempt) error {
	return s.fenced(ctx, "release", s.sql.release, a.Scope, a.Key, a.Token)
}

const replaceResponse = `
UPDATE idempotency_keys
   SET response_code = $4, response_headers = $5::text::jsonb, response_body = $6,
       resource_type = nullif($7, ''), resource_id = nullif($8, '')
 WHERE scope = $1 AND idempotency_key = $2 AND fencing_token = $3 AND status = 'COMPLETED'`

// ReplaceResponse replaces the stored response of the COMPLETED record a's
// token holds (see store.KeyResolver).
func (s *Store) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	args, err := completeArgs(a, resp)
	if err != nil {
		return fmt.Errorf("replace response: %w", err)
	}
	return s.fenced(ctx, "replace response", s.sql.replaceResponse, args...)
}
