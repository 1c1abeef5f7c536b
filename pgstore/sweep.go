package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemshared/engine"
	"github.com/idem-dev/idem/idemshared/keytable"
	"github.com/idem-dev/idem/idemshared/keytable/pgsql"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// sweepLock takes the sweep lock of one table holding key records (the key
// table, or one of its partitions) for the transaction, without waiting: a
// transaction-scoped advisory lock, which works through a pooler in
// transaction mode, unlike a session lock. The table's oid tells schemas
// and partitions apart.
const sweepLock = `
SELECT pg_try_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text))`

// sweepLockWait bounds the sweep's wait for a table lock: a sweep queued
// behind a migration gives up rather than hold up the requests queued
// behind it.
const sweepLockWait = `SET LOCAL lock_timeout = '2s'`

// deleteExpired deletes the oldest sweepable rows of one table through
// its expires_at index, at most $1, and skips rows another transaction
// holds (a request re-acquiring an expired key) instead of waiting for
// them; a row whose lease was renewed meanwhile is checked again when
// locked, and left. The rows it locked are then deleted by their physical
// address (a TID scan); adding any other condition to the outer WHERE
// lets the planner scan the whole expired range of the index a second
// time, in every batch.
//
// The scan starts at $2, the latest expiry the previous batch deleted: the
// index entries of the rows deleted since the last vacuum lie before it,
// and a scan from the start of the index would step over all of them in
// every batch (after a million deletions, some 19,000 index pages a batch).
//
// A ctid is an address within one table: the statement always names a
// table that holds rows, never a partitioned parent, where the same ctid
// names a row in every partition (the live keys of other users), nor a
// table Citus distributes (sweepCandidates).
var deleteExpired = `
DELETE FROM idempotency_keys
 WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM idempotency_keys
          WHERE ` + pgsql.Sweepable + ` AND expires_at >= $2
          ORDER BY expires_at
          LIMIT $1
            FOR UPDATE SKIP LOCKED))
RETURNING scope, idempotency_key, expires_at`

// sweepCandidates and sweepShard sweep a key table Citus distributes by
// scope, through its coordinator, which refuses deleteExpired's FOR
// UPDATE across shards, and where a ctid names a row only within one
// shard. sweepCandidates reads the oldest sweepable rows of every shard
// without locking them (each shard through its expires_at index, at most
// $1 from each, the oldest $1 kept on the coordinator) and the shard of
// each; then one sweepShard per shard, all in one batch and one
// distributed transaction, deletes its candidates: its scopes all on that
// shard, Citus sends it to that shard alone, where FOR UPDATE SKIP LOCKED
// and the ctid work as in deleteExpired. A row held by a request is
// skipped, and one re-acquired or renewed meanwhile is checked again when
// locked, and left. The key list is a product of scopes and keys: a
// sweepable row it names beyond the candidates goes too.
var (
	sweepCandidates = `
SELECT scope, idempotency_key, get_shard_id_for_distribution_column('idempotency_keys', scope)
  FROM idempotency_keys
 WHERE ` + pgsql.Sweepable + ` AND expires_at >= $2
 ORDER BY expires_at
 LIMIT $1`
	sweepShard = `
DELETE FROM idempotency_keys
 WHERE scope = ANY ($1) AND idempotency_key = ANY ($2)
   AND ctid = ANY (ARRAY(
         SELECT ctid FROM idempotency_keys
          WHERE scope = ANY ($1) AND idempotency_key = ANY ($2)
            AND ` + pgsql.Sweepable + `
            FOR UPDATE SKIP LOCKED))
RETURNING scope, idempotency_key, expires_at`
)

// citusInstalled and keysDistributed read whether Citus distributes the key
// table: the first, whether the catalog the second reads exists.
const (
	citusInstalled  = `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`
	keysDistributed = `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'idempotency_keys'::regclass AND partmethod = 'h')`
)

// sweepLeaves lists the tables that hold the key table's rows: the table
// itself, or its partitions (MigrateConfig.Partitions).
const sweepLeaves = `
SELECT relid::regclass::text FROM pg_partition_tree('idempotency_keys'::regclass) WHERE isleaf
 UNION ALL
SELECT 'idempotency_keys'::regclass::text
 WHERE (SELECT relkind FROM pg_class WHERE oid = 'idempotency_keys'::regclass) = 'r'`

// sweepWorkers is how many partitions one DeleteExpired sweeps at once; the
// pool's size bounds it too (sweepers), so that a sweep leaves connections
// to the requests.
const sweepWorkers = 4

// leaf is the sweep's SQL on one table holding key records, and where its
// next batch starts.
type leaf struct {
	lock, delete string
	// candidates, when not empty, is sweepCandidates: the table is
	// distributed by Citus, and delete is sweepShard.
	candidates string
	mu         sync.Mutex // guards from; held by the batch sweeping the table
	// from is the latest expiry the last batch deleted, while batches come
	// back full; zero, from the start of the index, after a short one, so
	// that a round picks up the rows earlier ones skipped (held by a
	// request, or a live lease).
	from time.Time
}

// sweepTargets are the store's leaves, found on the first sweep.
type sweepTargets struct {
	mu     sync.Mutex // guards leaves
	leaves []*leaf    // nil until found
}

// targets returns the tables to sweep, reading the catalog the first time:
// partitions do not change once the key table is migrated.
func (s *Store) targets(ctx context.Context) ([]*leaf, error) {
	s.sweep.mu.Lock()
	defer s.sweep.mu.Unlock()
	if s.sweep.leaves != nil {
		return s.sweep.leaves, nil
	}
	rows, err := s.pool.Query(ctx, s.sql.sweepLeaves)
	if err != nil {
		return nil, fmt.Errorf("delete expired: find partitions: %w", translate(err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("delete expired: find partitions: %w", translate(err))
	}
	if len(names) == 0 {
		return nil, errors.New("delete expired: the key table is partitioned and has no partitions")
	}
	distributed, err := s.distributed(ctx)
	if err != nil {
		return nil, fmt.Errorf("delete expired: read Citus's catalog: %w", translate(err))
	}
	leaves := make([]*leaf, 0, len(names))
	for _, name := range names {
		l := &leaf{lock: keytable.Rewrite(sweepLock, name), delete: keytable.Rewrite(deleteExpired, name)}
		if distributed {
			l.candidates, l.delete = keytable.Rewrite(sweepCandidates, name), keytable.Rewrite(sweepShard, name)
		}
		leaves = append(leaves, l)
	}
	s.sweep.leaves = leaves
	return leaves, nil
}

// distributed reports whether Citus distributes the key table.
func (s *Store) distributed(ctx context.Context) (bool, error) {
	var citus bool
	if err := s.pool.QueryRow(ctx, citusInstalled).Scan(&citus); err != nil || !citus {
		return false, err
	}
	err := s.pool.QueryRow(ctx, keytable.Rewrite(keysDistributed, s.sql.table)).Scan(&citus)
	return citus, err
}

// DeleteExpired deletes at most limit records past their expiry, but no
// live claim (see store.Capabilities.Sweep). Each table holding key records
// is swept in short transactions of its own, under its own sweep lock: the
// key table, or each of its partitions, up to sweepWorkers at once. The
// limit is shared among the partitions, and what one leaves unused (it
// had fewer expired records) goes to those that used all of theirs. A
// table another process sweeps is left to it; when every one is,
// DeleteExpired returns store.ErrSweepBusy.
func (s *Store) DeleteExpired(ctx context.Context, limit int) ([]store.KeyRef, error) {
	if err := engine.CheckLimit("pgstore", "delete expired", limit); err != nil {
		return nil, err
	}
	leaves, err := s.targets(ctx)
	if err != nil {
		return nil, err
	}
	if len(leaves) == 1 {
		return s.deleteExpired(ctx, leaves[0], limit)
	}
	var (
		deleted   []store.KeyRef
		ran, busy int
	)
	for active := leaves; limit > len(deleted) && len(active) > 0; {
		budget := limit - len(deleted)
		var jobs []sweepJob
		var next []*leaf
		for i, l := range active {
			n := budget / len(active)
			if i < budget%len(active) {
				n++
			}
			if n == 0 {
				next = append(next, l) // its turn comes with what the others leave
				continue
			}
			jobs = append(jobs, sweepJob{leaf: l, limit: n})
		}
		s.runSweepJobs(ctx, jobs)
		var errs []error
		for _, j := range jobs {
			ran++
			switch {
			case errors.Is(j.err, store.ErrSweepBusy):
				busy++
			case j.err != nil:
				errs = append(errs, j.err)
			case len(j.deleted) == j.limit:
				next = append(next, j.leaf) // it may have more
			}
			deleted = append(deleted, j.deleted...)
		}
		if err := errors.Join(errs...); err != nil {
			return deleted, err
		}
		active = next
	}
	if busy == ran {
		return nil, store.ErrSweepBusy
	}
	return deleted, nil
}

// sweepJob is one table's share of a sweep, and what came of it.
type sweepJob struct {
	leaf    *leaf
	limit   int
	deleted []store.KeyRef
	err     error
}

// runSweepJobs runs jobs, sweepers of them at a time.
func (s *Store) runSweepJobs(ctx context.Context, jobs []sweepJob) {
	work := make(chan *sweepJob)
	var wg sync.WaitGroup
	for range min(len(jobs), sweepers(s.pool.Config().MaxConns)) {
		wg.Go(func() {
			for j := range work {
				j.deleted, j.err = s.deleteExpired(ctx, j.leaf, j.limit)
			}
		})
	}
	for i := range jobs {
		work <- &jobs[i]
	}
	close(work)
	wg.Wait()
}

// sweepShards runs one batch of a key table Citus distributes in tx
// (sweepCandidates), scanning each deleted row with scan.
func sweepShards(ctx context.Context, tx pgx.Tx, l *leaf, limit int, scan func(pgx.Rows) error) error {
	rows, err := tx.Query(ctx, l.candidates, limit, l.from)
	if err != nil {
		return err
	}
	type keys struct{ scopes, keys []string }
	shards := map[int64]*keys{}
	var order []int64
	var scope, key string
	var shard int64
	_, err = pgx.ForEachRow(rows, []any{&scope, &key, &shard}, func() error {
		if shards[shard] == nil {
			shards[shard] = &keys{}
			order = append(order, shard)
		}
		shards[shard].scopes = append(shards[shard].scopes, scope)
		shards[shard].keys = append(shards[shard].keys, key)
		return nil
	})
	if err != nil || len(order) == 0 {
		return err
	}
	b := &pgx.Batch{}
	for _, id := range order {
		b.Queue(l.delete, shards[id].scopes, shards[id].keys)
	}
	br := tx.SendBatch(ctx, b)
	for range order {
		rows, err := br.Query()
		if err == nil {
			err = scan(rows)
		}
		if err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

// sweepers is how many partitions a sweep takes at once on a pool of
// maxConns: sweepWorkers, but at most half the pool.
func sweepers(maxConns int32) int { return max(1, min(sweepWorkers, int(maxConns)/2)) }

// deleteExpired sweeps one table in one transaction, from where its last
// full batch ended.
func (s *Store) deleteExpired(ctx context.Context, l *leaf, limit int) ([]store.KeyRef, error) {
	if !l.mu.TryLock() {
		return nil, store.ErrSweepBusy // another goroutine of this process sweeps it
	}
	defer l.mu.Unlock()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("delete expired: begin: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(ctx) }()
	b := &pgx.Batch{}
	b.Queue(sweepLockWait)
	b.Queue(l.lock)
	br := tx.SendBatch(ctx, b)
	var locked bool
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&locked)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("delete expired: sweep lock: %w", translate(err))
	}
	if !locked {
		return nil, store.ErrSweepBusy
	}
	var (
		deleted []store.KeyRef
		k       store.KeyRef
		latest  time.Time
		expires time.Time
	)
	scan := func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&k.Scope, &k.Key, &expires}, func() error {
			deleted = append(deleted, k)
			if expires.After(latest) {
				latest = expires
			}
			return nil
		})
		return err
	}
	if l.candidates != "" {
		err = sweepShards(ctx, tx, l, limit, scan)
	} else {
		var rows pgx.Rows
		if rows, err = tx.Query(ctx, l.delete, limit, l.from); err == nil {
			err = scan(rows)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("delete expired: %w", translate(err))
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return nil, fmt.Errorf("delete expired: commit: %w", errors.Join(store.ErrTxAborted, err))
		}
		return nil, fmt.Errorf("delete expired: commit: %w", translate(err))
	}
	l.from = time.Time{}
	if len(deleted) == limit {
		l.from = latest
	}
	return deleted, nil
}
