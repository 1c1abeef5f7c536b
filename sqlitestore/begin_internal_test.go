package sqlitestore

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// TestBeginNowAfterABeginThatWentThrough: the BEGIN IMMEDIATE that a
// wait's bound cut short may have begun the transaction all the same.
// beginNow then ends it, unseen by the transaction's hooks, and begins
// afresh, where its BEGIN failed with "cannot start a transaction within
// a transaction" and the connection went back to the pool inside it,
// failing every later BEGIN on it (the completer's, seen in CI).
func TestBeginNowAfterABeginThatWentThrough(t *testing.T) {
	ctx := t.Context()
	db, err := Open(filepath.Join(t.TempDir(), "begin.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	c, err := db.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	var rolledBack atomic.Int32
	h := hooks{rollback: func() { rolledBack.Add(1) }}
	require.NoError(t, setHooks(c, h))
	_, err = c.ExecContext(ctx, "BEGIN IMMEDIATE") // went through, its caller told otherwise
	require.NoError(t, err)

	require.NoError(t, beginNow(ctx, c, h))
	require.Equal(t, int32(0), rolledBack.Load(), "the hooks did not see the first transaction end")
	_, err = c.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err, "beginNow left the connection in a transaction of its own")
	require.Equal(t, int32(1), rolledBack.Load(), "the new transaction has the hooks")
	require.NoError(t, setHooks(c, hooks{}))
}
