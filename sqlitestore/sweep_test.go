package sqlitestore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// The sweep's inner query walks the expires_at index, oldest first, and the
// delete finds its rows by rowid: no scan of the table.
func TestSweepUsesExpiresAtIndex(t *testing.T) {
	t.Parallel()
	_, db := newStore(t)
	rows, err := db.QueryContext(context.Background(), `EXPLAIN QUERY PLAN
DELETE FROM idempotency_keys
 WHERE rowid IN (SELECT rowid FROM idempotency_keys
                  WHERE expires_at <= 0
                    AND (status <> 'PROCESSING' OR lease_expires_at <= 0)
                  ORDER BY expires_at
                  LIMIT 1000)
RETURNING scope, idempotency_key`)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	text := strings.Join(plan, "\n")
	require.Contains(t, text, "INDEX idempotency_keys_expires_at_idx (expires_at<?)", text)
	require.Contains(t, text, "USING INTEGER PRIMARY KEY (rowid=?)", text)
	require.NotContains(t, text, "SCAN idempotency_keys", text)
}
