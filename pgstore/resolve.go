package pgstore

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// ListCompleted lists the keys of COMPLETED records whose response has
// status code code (see store.KeyResolver).
func (s *Store) ListCompleted(ctx context.Context, code int, after store.KeyRef, limit int) ([]store.KeyRef, error) {
	if err := engine.CheckLimit("pgstore", "list completed", limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql.listCompleted, code, after.Scope, after.Key, limit)
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", translate(err))
	}
	refs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.KeyRef, error) { return engine.ScanKeyRef(row) })
	if err != nil {
		return nil, fmt.Errorf("list completed: %w", translate(err))
	}
	return refs, nil
}

// Release marks the COMPLETED record a's token holds FAILED, so that the
// next retry runs afresh (see store.KeyResolver), in the transaction
// when on a Tx (store.AuditTx).
func (k keys) Release(ctx context.Context, a store.Attempt) error {
	return k.fenced(ctx, "release", k.sql.release, a.Scope, a.Key, a.Token)
}

// ReplaceResponse replaces the stored response of the COMPLETED record a's
// token holds (see store.KeyResolver), in the transaction when on a Tx
// (store.AuditTx).
func (k keys) ReplaceResponse(ctx context.Context, a store.Attempt, resp store.Response) error {
	return k.fenced(ctx, "replace response", k.sql.replaceResponse, completeArgs(a, resp)...)
}
