package pgstore_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/storetest"
)

func TestConsumer(t *testing.T) {
	t.Parallel()
	storetest.RunConsumer(t, func(t *testing.T) storetest.Business {
		s := newStore(t)
		pool := s.Pool()
		_, err := pool.Exec(context.Background(), `CREATE TABLE effects (id bigserial PRIMARY KEY, key text NOT NULL)`)
		require.NoError(t, err)
		return storetest.Business{
			Store: s,
			WriteFunc: func(ctx context.Context, key string) (id int64, err error) {
				err = pgstore.DB(ctx, pool).QueryRow(ctx, `INSERT INTO effects (key) VALUES ($1) RETURNING id`, key).Scan(&id)
				return id, err
			},
			CountFunc: func(ctx context.Context, key string) (n int, err error) {
				err = pool.QueryRow(ctx, `SELECT count(*) FROM effects WHERE key = $1`, key).Scan(&n)
				return n, err
			},
		}
	})
}
