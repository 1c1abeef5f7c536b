package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/storetest"
)

func TestConsumer(t *testing.T) {
	t.Parallel()
	storetest.RunConsumer(t, func(t *testing.T) storetest.Business {
		s, db := newStore(t)
		_, err := db.ExecContext(context.Background(), `CREATE TABLE effects (id INTEGER PRIMARY KEY, key TEXT NOT NULL)`)
		require.NoError(t, err)
		return storetest.Business{
			Store: s,
			WriteFunc: func(ctx context.Context, key string) (id int64, err error) {
				err = sqlitestore.DB(ctx, db).QueryRowContext(ctx, `INSERT INTO effects (key) VALUES (?) RETURNING id`, key).Scan(&id)
				return id, err
			},
			CountFunc: func(ctx context.Context, key string) (n int, err error) {
				err = db.QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE key = ?`, key).Scan(&n)
				return n, err
			},
		}
	})
}
