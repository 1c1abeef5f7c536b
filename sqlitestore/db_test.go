package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

func TestDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OutsideARequestIsTheFallback", func(t *testing.T) {
		t.Parallel()
		db := openDB(t)
		require.Same(t, db, sqlitestore.DB(ctx, db))
	})

	t.Run("HandlerCannotEndTheTransaction", func(t *testing.T) {
		t.Parallel()
		s, db := newStore(t)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		got := sqlitestore.DB(tx.Context(ctx), db)
		require.NotEqual(t, sqlitestore.DBTX(db), got, "an idempotent request gets its transaction")
		_, ok := got.(interface{ Commit() error })
		require.False(t, ok, "Commit belongs to the middleware")
		_, ok = got.(interface{ Rollback() error })
		require.False(t, ok, "Rollback belongs to the middleware")
		_, ok = got.(*sql.Tx)
		require.False(t, ok)
	})

	for _, mode := range []idem.Mode{idem.ModeAtomic, idem.ModeLeased} {
		t.Run("WritesCommitWithTheKey"+strings.ToUpper(mode.String()[:1])+mode.String()[1:], func(t *testing.T) {
			t.Parallel()
			s, db := newStore(t)
			_, err := db.ExecContext(ctx, "CREATE TABLE payments (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)")
			require.NoError(t, err)
			mw, err := idem.New(s, idem.Config{Mode: mode})
			require.NoError(t, err)

			// The handler writes a payment through DB, then answers with
			// the status the request asks for.
			var runs int
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				id := fmt.Sprintf("p%d", runs)
				_, err := sqlitestore.DB(r.Context(), db).ExecContext(r.Context(),
					"INSERT INTO payments (id, amount) VALUES (?, 100)", id)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				status, _ := strconv.Atoi(r.URL.Query().Get("status"))
				w.WriteHeader(status)
				fmt.Fprint(w, id)
			})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mw.Require(handler).ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
			}))
			defer srv.Close()
			post := func(key string, status int) (int, string, string) {
				req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/payments?status=%d", srv.URL, status), strings.NewReader(`{"amount":100}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
			}
			payments := func() []string {
				rows, err := db.QueryContext(ctx, "SELECT id FROM payments ORDER BY id")
				require.NoError(t, err)
				defer rows.Close()
				var ids []string
				for rows.Next() {
					var id string
					require.NoError(t, rows.Scan(&id))
					ids = append(ids, id)
				}
				require.NoError(t, rows.Err())
				return ids
			}

			failed := uuid.NewString()
			code, body, _ := post(failed, http.StatusInternalServerError)
			require.Equal(t, http.StatusInternalServerError, code)
			require.Equal(t, "p1", body)
			require.Empty(t, payments(), "a 500 rolls the handler's write back")

			created := uuid.NewString()
			code, body, replayed := post(created, http.StatusCreated)
			require.Equal(t, http.StatusCreated, code)
			require.Equal(t, "p2", body)
			require.Empty(t, replayed)
			require.Equal(t, []string{"p2"}, payments(), "a 201 commits the handler's write")
			rec, err := s.Get(ctx, "alice", created)
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, rec.Status)

			code, body, replayed = post(created, http.StatusCreated)
			require.Equal(t, http.StatusCreated, code)
			require.Equal(t, "p2", body)
			require.Equal(t, "true", replayed)
			require.Equal(t, []string{"p2"}, payments(), "a replay writes nothing")
			require.Equal(t, 2, runs)
		})
	}
}
