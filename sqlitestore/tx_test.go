package sqlitestore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/sqlitestore"
)

func newClaim(key string) store.Claim {
	h := sha256.Sum256([]byte("body"))
	return store.Claim{
		Scope:       "alice",
		Key:         key,
		Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/payments", Hash: h[:]},
		Token:       uuid.NewString(),
		Lease:       time.Minute,
		TTL:         time.Hour,
	}
}

func lockOf(c store.Claim) store.Attempt {
	return store.Attempt{Scope: c.Scope, Key: c.Key, Token: c.Token}
}

// holdWriteLock begins a transaction of s and takes the write lock with a
// claim; the caller ends it.
func holdWriteLock(t *testing.T, s *sqlitestore.Store) (store.Tx, store.Claim) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Begin(ctx, store.TxOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	c := newClaim(uuid.NewString())
	_, inserted, err := tx.Insert(ctx, c)
	require.NoError(t, err)
	require.True(t, inserted)
	return tx, c
}

// notWithin fails if done delivers within d.
func notWithin[T any](t *testing.T, done <-chan T, d time.Duration) {
	t.Helper()
	select {
	case v := <-done:
		t.Fatalf("did not wait: %+v", v)
	case <-time.After(d):
	}
}

func TestWriteLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("BeginHoldsNothingUntilFirstStatement", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		// A leased-mode request has begun its handler's transaction; its
		// lease renewals and a duplicate's claim must not wait for it.
		c := newClaim(uuid.NewString())
		start := time.Now()
		_, inserted, err := s.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		require.NoError(t, s.Renew(ctx, lockOf(c), time.Minute))
		require.Less(t, time.Since(start), time.Second)
	})

	t.Run("LockWaitBoundsTheWait", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		holdWriteLock(t, s)
		tx2, err := s.Begin(ctx, store.TxOptions{MaxWait: 200 * time.Millisecond})
		require.NoError(t, err)
		defer tx2.Rollback(ctx)
		start := time.Now()
		_, _, err = tx2.Insert(ctx, newClaim(uuid.NewString()))
		require.ErrorIs(t, err, store.ErrWaitTimeout)
		require.GreaterOrEqual(t, time.Since(start), 190*time.Millisecond)
		require.Less(t, time.Since(start), 2*time.Second)
	})

	t.Run("ZeroLockWaitIsTheDefaultNotNone", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		tx1, first := holdWriteLock(t, s)
		done := make(chan error, 1)
		go func() {
			tx2, err := s.Begin(ctx, store.TxOptions{})
			if err != nil {
				done <- err
				return
			}
			defer tx2.Rollback(ctx)
			_, _, err = tx2.Insert(ctx, newClaim(first.Key))
			done <- err
		}()
		notWithin(t, done, 400*time.Millisecond)
		require.NoError(t, tx1.Complete(ctx, lockOf(first), store.Response{StatusCode: 201}))
		require.NoError(t, tx1.Commit(ctx))
		require.NoError(t, <-done)
	})

	t.Run("StoreOperationsWaitForTheLock", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		other := newClaim(uuid.NewString())
		_, _, err := s.Insert(ctx, other)
		require.NoError(t, err)
		tx1, _ := holdWriteLock(t, s)
		done := make(chan error, 1)
		go func() { done <- s.Complete(ctx, lockOf(other), store.Response{StatusCode: 201}) }()
		notWithin(t, done, 300*time.Millisecond)
		require.NoError(t, tx1.Commit(ctx))
		require.NoError(t, <-done, "an auto-committed write waits rather than failing with database is locked")
	})

	t.Run("WritersOutsideTheStoreAreWaitedFor", func(t *testing.T) {
		t.Parallel()
		s, db := newStore(t)
		// Another process's transaction on the same file.
		foreign := reopen(t, db)
		ftx, err := foreign.BeginTx(ctx, nil) // BEGIN IMMEDIATE
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, _, err := s.Insert(ctx, newClaim(uuid.NewString()))
			done <- err
		}()
		notWithin(t, done, 300*time.Millisecond)
		require.NoError(t, ftx.Rollback())
		require.NoError(t, <-done)

		ftx, err = foreign.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer ftx.Rollback()
		tx, err := s.Begin(ctx, store.TxOptions{MaxWait: 200 * time.Millisecond})
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, _, err = tx.Insert(ctx, newClaim(uuid.NewString()))
		require.ErrorIs(t, err, sqlitestore.ErrBusy, "no request of the store holds the lock")
		require.NotErrorIs(t, err, store.ErrWaitTimeout)
	})

	t.Run("WaitOutlastsAShortBusyTimeout", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "idem.db")
		db, err := sqlitestore.Open(path)
		require.NoError(t, err)
		defer db.Close()
		_, err = sqlitestore.Migrate(ctx, db)
		require.NoError(t, err)
		// A *sql.DB not from Open: no busy_timeout at all.
		bare, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer bare.Close()
		s := sqlitestore.New(bare)

		ftx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, _, err := s.Insert(ctx, newClaim(uuid.NewString()))
			done <- err
		}()
		notWithin(t, done, 300*time.Millisecond)
		require.NoError(t, ftx.Rollback())
		require.NoError(t, <-done)
	})

	t.Run("CanceledContextEndsTheWait", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		holdWriteLock(t, s)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, _, err := s.Insert(cctx, newClaim(uuid.NewString()))
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, store.ErrWaitTimeout)
		require.Less(t, time.Since(start), time.Second)
	})

	t.Run("ReadsGoOnWhileAWriterHoldsTheLock", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		committed := newClaim(uuid.NewString())
		_, _, err := s.Insert(ctx, committed)
		require.NoError(t, err)
		// The lock is held until the test ends: a read that waited for it
		// would fail with the store's bounded wait, never return a record.
		_, held := holdWriteLock(t, s)
		rec, err := s.Get(ctx, committed.Scope, committed.Key)
		require.NoError(t, err)
		require.Equal(t, committed.Token, rec.Token)
		_, err = s.Get(ctx, held.Scope, held.Key)
		require.ErrorIs(t, err, store.ErrNotFound, "the holder's claim is not committed")
	})

	t.Run("UnusedTxCommitsAndRollsBack", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, tx.Rollback(ctx))
		_, _, err = tx.Insert(ctx, newClaim(uuid.NewString()))
		require.ErrorIs(t, err, sql.ErrTxDone)
	})
}

// reopen opens db's file a second time, as another process would.
func reopen(t *testing.T, db *sql.DB) *sql.DB {
	t.Helper()
	var path string
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path))
	other, err := sqlitestore.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	return other
}

func TestAbortedTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// begin returns a store with a business table and a transaction that
	// has claimed a key and written a row through DB.
	begin := func(t *testing.T) (*sqlitestore.Store, *sql.DB, store.Tx, context.Context, store.Claim) {
		s, db := newStore(t)
		_, err := db.ExecContext(ctx, "CREATE TABLE payments (id TEXT PRIMARY KEY)")
		require.NoError(t, err)
		tx, err := s.Begin(ctx, store.TxOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		c := newClaim(uuid.NewString())
		_, _, err = tx.Insert(ctx, c)
		require.NoError(t, err)
		hctx := tx.Context(ctx)
		_, err = sqlitestore.DB(hctx, db).ExecContext(hctx, "INSERT INTO payments VALUES ('p1')")
		require.NoError(t, err)
		return s, db, tx, hctx, c
	}
	// requireAborted checks that nothing more runs in tx, nothing of it
	// committed, and the write lock is free.
	requireAborted := func(t *testing.T, s *sqlitestore.Store, db *sql.DB, tx store.Tx, hctx context.Context, c store.Claim) {
		_, err := sqlitestore.DB(hctx, db).ExecContext(hctx, "INSERT INTO payments VALUES ('p2')")
		require.ErrorIs(t, err, store.ErrTxAborted)
		require.ErrorIs(t, tx.Complete(ctx, lockOf(c), store.Response{StatusCode: 201}), store.ErrTxAborted)
		require.ErrorIs(t, tx.Commit(ctx), store.ErrTxAborted)
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM payments").Scan(&n))
		require.Zero(t, n, "nothing commits on its own after SQLite ended the transaction")
		_, err = s.Get(ctx, c.Scope, c.Key)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, inserted, err := s.Insert(ctx, newClaim(c.Key))
		require.NoError(t, err, "the write lock is free")
		require.True(t, inserted)
	}

	t.Run("InterruptedStatement", func(t *testing.T) {
		t.Parallel()
		s, db, tx, hctx, c := begin(t)
		// The client goes away in the middle of a write: SQLite
		// interrupts it and rolls the whole transaction back.
		sctx, cancel := context.WithTimeout(hctx, 50*time.Millisecond)
		defer cancel()
		_, err := sqlitestore.DB(sctx, db).ExecContext(sctx, `
			WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 100000000)
			INSERT INTO payments SELECT 'q' || x FROM n`)
		require.Error(t, err)
		requireAborted(t, s, db, tx, hctx, c)
	})

	t.Run("HandlerRunsCommit", func(t *testing.T) {
		t.Parallel()
		s, db, tx, hctx, c := begin(t)
		_, err := sqlitestore.DB(hctx, db).ExecContext(hctx, "COMMIT")
		require.Error(t, err, "the commit hook refuses a commit the store did not make")
		requireAborted(t, s, db, tx, hctx, c)
	})

	t.Run("HandlerRunsRollback", func(t *testing.T) {
		t.Parallel()
		s, db, tx, hctx, c := begin(t)
		_, err := sqlitestore.DB(hctx, db).ExecContext(hctx, "ROLLBACK")
		require.NoError(t, err)
		requireAborted(t, s, db, tx, hctx, c)
	})

	t.Run("BusinessErrorDoesNotAbort", func(t *testing.T) {
		t.Parallel()
		_, db, tx, hctx, c := begin(t)
		_, err := sqlitestore.DB(hctx, db).ExecContext(hctx, "INSERT INTO payments VALUES ('p1')")
		require.ErrorContains(t, err, "UNIQUE")
		require.NotErrorIs(t, err, store.ErrTxAborted, "in SQLite a failed statement fails alone")
		require.NoError(t, tx.Complete(ctx, lockOf(c), store.Response{StatusCode: 409}))
		require.NoError(t, tx.Commit(ctx))
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM payments").Scan(&n))
		require.Equal(t, 1, n)
	})
}
