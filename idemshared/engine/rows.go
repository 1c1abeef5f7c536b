package engine

import (
	"context"
	"fmt"

	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/store"
)

// What every SQL store shares whatever its driver (database/sql or pgx):
// an operator's search as keytable takes it, the rows of the operator's
// and the completer's reads, and the check of their limits.

// Row is a result row of any driver: *sql.Row, *sql.Rows, pgx.Row,
// pgx.CollectableRow.
type Row interface{ Scan(dest ...any) error }

// SearchQuery is an operator's search (store.KeyQuery) as keytable.Search
// takes it.
func SearchQuery(q store.KeyQuery) keytable.Query {
	return keytable.Query{Scope: q.Scope, Key: q.Key, Status: string(q.Status), Unfinished: q.Unfinished,
		ResponseCode: q.ResponseCode, PathPrefix: q.PathPrefix, CreatedBefore: q.CreatedBefore, Limit: q.MaxRecords()}
}

// collect runs query on q and scans each row with scan.
func collect[T any](ctx context.Context, q Executor, query string, args []any, scan func(Row) (T, error)) ([]T, error) {
	var out []T
	err := q.Query(ctx, query, args, func(r Row) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	return out, err
}

// scanUnfinished reads a row of an unfinished record (FindUnfinished):
// scope, key, the fingerprint's method, path, hash and version, the
// recovery point and the token.
func scanUnfinished(r Row) (store.Unfinished, error) {
	var u store.Unfinished
	fp := &u.Fingerprint
	err := r.Scan(&u.Scope, &u.Key, &fp.Method, &fp.Path, &fp.Hash, &fp.Version, &u.Point, &u.Token)
	return u, err
}

// scanKeyRef reads a row of scope and key.
func scanKeyRef(r Row) (store.KeyRef, error) {
	var k store.KeyRef
	err := r.Scan(&k.Scope, &k.Key)
	return k, err
}

// CheckLimit refuses a read of no rows: store names the store's package,
// op the operation.
func CheckLimit(store, op string, limit int) error {
	if limit <= 0 {
		return fmt.Errorf("%s: %s: limit must be positive, got %d", store, op, limit)
	}
	return nil
}
