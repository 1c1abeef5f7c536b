package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idem-dev/idem/store"
)

var _ store.KeyResolver = (*Store)(nil)

// listCompleted walks the primary key in order from after, filtering: an
// operator's scan, stopped at the limit.
const listCompleted = `
SELECT scope, idempotency_key FROM idempotency_keys
 WHERE status = 'COMPLETED' AND response_code = :code
   AND (scope, idempotency_key) > (:scope, :key)
 ORDER BY scope, idempotency_key
 LIMIT :limit`

// ListCompleted lists the keys of COMPLETED records whose response has
// status code code (see store.KeyResolver). It reads without the write
// lock.
func (s *Store) ListCompleted(ctx context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlitestore: list completed: limit must be positive, got %d", limit)
	}
	rows, err := s.db.QueryContext(ctx, s.sql.listCompleted, sql.Named("code", code),
		sql.Named("scope", after.Scope), sql.Named("key", after.Key), sql.Named("limit", limit))
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", translate(err))
	}
	defer rows.Close()
	var refs []store.KeyRef
	for rows.Next() {
		var k store.KeyRef
		if err := rows.Scan(&k.Scope, &k.Key); err != nil {
			return nil, fmt.Errorf("list completed: %w", translate(err))
		}
		refs = append(refs, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list completed: %w", translate(err))
	}
	return refs, nil
}

const release = `
UPDATE idempotency_keys
   SET status = 'FAILED',
       response_code = NULL, response_headers = NULL, response_body = NULL,
       resource_type = NULL, resource_id = NULL
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'COMPLETED'`

// Release marks the COMPLETED record a's token holds FAILED, so that the
// next retry runs afresh (see store.KeyResolver), in the transaction
// when on a Tx (store.AuditTx).
func (k keys) Release(ctx context.Context, a store.Attempt) error {
	return k.fenced(ctx, "release", k.sql.release, a)
}

const replaceResponse = `
UPDATE idempotency_keys
   SET response_code = :code, response_headers = :headers, response_body = :body,
       resource_type = nullif(:resource_type, ''), resource_id = nullif(:resource_id, ''),
       expires_at = MAX(expires_at, :now + (expires_at - claimed_at))
 WHERE scope = :scope AND idempotency_key = :key AND fencing_token = :token AND status = 'COMPLETED'`

// ReplaceResponse replaces the stored response of the COMPLETED record a's
// token holds (see store.KeyResolver), in the transaction when on a Tx
// (store.AuditTx).
func (k keys) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	return k.fenced(ctx, "replace response", k.sql.replaceResponse, a, responseArgs(resp)...)
}
