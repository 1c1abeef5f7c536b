package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/store"
)

// CompleteAndCommit pipelines the completion and the COMMIT: the fence
// must still hold, so a completion whose token lost the key commits
// nothing, not even the handler's writes before it, and the connection
// goes back to the pool either way.
func TestCompleteAndCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, err := s.Pool().Exec(ctx, `CREATE TABLE payments (key text)`)
	require.NoError(t, err)
	paid := func(key string) int {
		var n int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM payments WHERE key = $1`, key).Scan(&n))
		return n
	}
	// run claims key in a transaction, writes a payment in it and completes
	// it with token (the claim's own when empty).
	run := func(key, token string) (bool, error) {
		c := newClaim(key)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		_, inserted, err := tx.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		_, err = pgstore.DB(tx.Context(ctx), s.Pool()).Exec(ctx, `INSERT INTO payments VALUES ($1)`, key)
		require.NoError(t, err)
		if token == "" {
			token = c.Token
		}
		ct := tx.(interface {
			CompleteAndCommit(context.Context, store.Attempt, store.Response) (bool, error)
		})
		completed, err := ct.CompleteAndCommit(ctx, store.Attempt{Scope: "alice", Key: key, Token: token},
			store.Response{StatusCode: 201, Body: []byte(`{"ok":true}`)})
		if err != nil && !completed {
			require.NoError(t, tx.Rollback(ctx))
		}
		return completed, err
	}

	t.Run("Commits", func(t *testing.T) {
		completed, err := run("ok", "")
		require.NoError(t, err)
		require.True(t, completed)
		rec, err := s.Get(ctx, "alice", "ok")
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
		require.Equal(t, `{"ok":true}`, string(rec.Response.Body))
		require.Equal(t, 1, paid("ok"))
	})
	t.Run("LostLockCommitsNothing", func(t *testing.T) {
		completed, err := run("lost", uuid.NewString())
		require.ErrorIs(t, err, store.ErrNotHeld)
		require.False(t, completed)
		_, err = s.Get(ctx, "alice", "lost")
		require.ErrorIs(t, err, store.ErrNotFound, "the claim was rolled back with the transaction")
		require.Zero(t, paid("lost"), "the handler's write was committed without its key")
	})
	require.Zero(t, s.Pool().Stat().AcquiredConns(), "a connection is left checked out")
}

// Writes deferred onto the request's transaction go with its next
// statement, or with the completion and COMMIT: they commit with the key,
// a failing one takes the key and everything else down with it, and a
// rollback drops them.
func TestDefer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	_, err := s.Pool().Exec(ctx, `CREATE TABLE entries (key text, amount int CHECK (amount > 0))`)
	require.NoError(t, err)
	require.False(t, pgstore.Queue(ctx, "entry", `INSERT INTO entries VALUES ('x', 1)`), "no ambient transaction")
	count := func(key string) int {
		var n int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM entries WHERE key = $1`, key).Scan(&n))
		return n
	}
	type completer interface {
		CompleteAndCommit(context.Context, store.Attempt, store.Response) (bool, error)
	}
	run := func(key string, amount int, readBack bool) (bool, error) {
		c := store.Claim{Scope: "alice", Key: key, Token: uuid.NewString(), Lease: time.Minute, TTL: time.Hour,
			Fingerprint: store.Fingerprint{Version: 1, Method: "POST", Path: "/pay", Hash: make([]byte, 32)}}
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		_, inserted, err := tx.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		tctx := tx.Context(ctx)
		require.True(t, pgstore.Queue(tctx, "entry", `INSERT INTO entries VALUES ($1, $2)`, key, amount))
		if readBack {
			// A later statement sees the deferred write: it went first.
			var n int
			require.NoError(t, pgstore.DB(tctx, s.Pool()).QueryRow(ctx, `SELECT count(*) FROM entries WHERE key = $1`, key).Scan(&n))
			require.Equal(t, 1, n)
		}
		completed, err := tx.(completer).CompleteAndCommit(ctx, store.Attempt{Scope: "alice", Key: key, Token: c.Token},
			store.Response{StatusCode: 201})
		if err != nil && !completed {
			require.NoError(t, tx.Rollback(ctx))
		}
		return completed, err
	}

	t.Run("CommitsWithTheKey", func(t *testing.T) {
		_, err := run("ok", 5, false)
		require.NoError(t, err)
		require.Equal(t, 1, count("ok"))
		rec, err := s.Get(ctx, "alice", "ok")
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Status)
	})
	t.Run("ALaterStatementSeesIt", func(t *testing.T) {
		_, err := run("seen", 5, true)
		require.NoError(t, err)
		require.Equal(t, 1, count("seen"))
	})
	t.Run("AFailingWriteTakesTheKeyDown", func(t *testing.T) {
		completed, err := run("bad", -1, false)
		require.ErrorContains(t, err, "entry")
		require.False(t, completed)
		_, err = s.Get(ctx, "alice", "bad")
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Zero(t, count("bad"))
	})
	t.Run("KeptWhenAStatementCannotBegin", func(t *testing.T) {
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		tctx := tx.Context(ctx)
		require.True(t, pgstore.Queue(tctx, "entry", `INSERT INTO entries VALUES ('kept', 1)`))
		gone, cancel := context.WithCancel(tctx)
		cancel() // the handler's first statement gets no connection
		_, err = pgstore.DB(gone, s.Pool()).Exec(gone, `INSERT INTO entries VALUES ($1, 1)`, "after")
		require.Error(t, err)
		require.NoError(t, tx.Commit(ctx))
		require.Equal(t, 1, count("kept"), "the queued write went with the commit")
		require.Zero(t, count("after"))
	})
	t.Run("RollbackDropsIt", func(t *testing.T) {
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		require.True(t, pgstore.Queue(tx.Context(ctx), "entry", `INSERT INTO entries VALUES ('dropped', 1)`))
		require.NoError(t, tx.Rollback(ctx))
		require.Zero(t, count("dropped"))
	})
	require.Zero(t, s.Pool().Stat().AcquiredConns(), "a connection is left checked out")
}
