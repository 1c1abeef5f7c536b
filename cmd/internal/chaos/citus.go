package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// citusOpts are the server settings of every node of a [Citus] cluster, as
// scripts/test-citus.sh sets them: Citus preloaded, logical decoding for
// a shard move, prepared transactions for commits over several workers,
// the nodes' connections to each other without TLS on loopback, and 4
// shards per table (2 per worker).
const citusOpts = "-c shared_preload_libraries=citus -c wal_level=logical -c max_prepared_transactions=300 " +
	"-c max_wal_senders=20 -c max_replication_slots=20 -c citus.node_conninfo=sslmode=disable -c citus.shard_count=4"

// citusWorkerDown is how long a stopped worker stays down before it is
// started again.
const citusWorkerDown = 3 * time.Second

// Citus is a Citus cluster of the harness's own: a coordinator and
// workers, each a throwaway [Cluster] on a free loopback port. The
// replicas connect to the coordinator (through the fault proxies); every
// table is distributed by migrate --citus. Its faults alternate: a worker,
// the one holding the busiest user's shard, stopped at once (pg_ctl stop -m
// immediate) and started again citusWorkerDown later; then a live move of
// that user's shard to the other worker (citus_move_shard_placement),
// checked to be placed there after.
type Citus struct {
	coord   *Cluster
	workers []*Cluster
	db      string // the database of the phase running (Prepare)
	faults  int    // disruptions in db so far
}

// StartCitus starts a coordinator and workers workers.
func StartCitus(ctx context.Context, workers int) (*Citus, error) {
	if workers < 2 {
		return nil, errors.New("a shard move needs at least 2 workers")
	}
	c := &Citus{}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	var err error
	if c.coord, err = startCluster(ctx, "idem-chaos-citus-coordinator-", citusOpts); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	for i := range workers {
		w, err := startCluster(ctx, fmt.Sprintf("idem-chaos-citus-worker%d-", i+1), citusOpts)
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		c.workers = append(c.workers, w)
	}
	// Fail here, saying so, when Citus is not installed.
	if err := execSQL(ctx, c.coord.DSN("postgres"), "CREATE EXTENSION citus"); err != nil {
		return nil, fmt.Errorf("Citus is not installed in this PostgreSQL (../shared/citus/build.sh installs it): %w", err)
	}
	ok = true
	return c, nil
}

// DSN connects to database db on the coordinator.
func (c *Citus) DSN(db string) string { return c.coord.DSN(db) }

// ProxyTarget is the coordinator: the fault proxies sit between the
// replicas and it.
func (c *Citus) ProxyTarget() string { return c.coord.Addr() }

// MigrateFlags distributes every table.
func (c *Citus) MigrateFlags() []string { return []string{"--citus"} }

// Describe names the nodes.
func (c *Citus) Describe() string {
	ws := make([]string, len(c.workers))
	for i, w := range c.workers {
		ws[i] = w.Addr()
	}
	return fmt.Sprintf("Citus coordinator at %s, workers at %s (%s)", c.coord.Addr(), strings.Join(ws, ", "), c.coord.bindir)
}

// Prepare creates database db on every worker (the coordinator has it),
// the extension in each, and adds the workers to the coordinator's
// metadata, which is per database: what an operator does once
// (docs/operations.md, "Running on Citus").
func (c *Citus) Prepare(ctx context.Context, db string) error {
	for _, w := range c.workers {
		if err := execSQL(ctx, w.DSN("postgres"), "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db); err != nil {
			return fmt.Errorf("worker %s: %w", w.Addr(), err)
		}
		if err := execSQL(ctx, w.DSN(db), "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("worker %s: %w", w.Addr(), err)
		}
	}
	stmts := []string{"CREATE EXTENSION citus", fmt.Sprintf("SELECT citus_set_coordinator_host('127.0.0.1', %d)", c.coord.port)}
	for _, w := range c.workers {
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node('127.0.0.1', %d)", w.port))
	}
	if err := execSQL(ctx, c.coord.DSN(db), stmts...); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.db, c.faults = db, 0
	return nil
}

// Disrupt restarts the busiest user's worker the first time in a database,
// moves that user's shard the next, and so on.
func (c *Citus) Disrupt(ctx context.Context) (Disruption, error) {
	conn, err := pgx.Connect(ctx, c.coord.DSN(c.db))
	if err != nil {
		return Disruption{}, err
	}
	defer conn.Close(ctx)
	shard, port, keys, err := c.busiest(ctx, conn)
	if err != nil {
		return Disruption{}, err
	}
	c.faults++
	if c.faults%2 == 1 {
		return c.restartWorker(ctx, conn, shard, port)
	}
	return c.moveShard(ctx, conn, shard, port, keys)
}

// busiest returns the shard of the key table that holds the most keys of
// one user (paymentsd's user, the gateway's scope), the worker port it is
// placed on, and that user's key count.
func (c *Citus) busiest(ctx context.Context, conn *pgx.Conn) (shard int64, port, keys int, err error) {
	err = conn.QueryRow(ctx, `
		SELECT get_shard_id_for_distribution_column('idempotency_keys', scope), n
		FROM (SELECT scope, count(*) AS n FROM idempotency_keys GROUP BY scope ORDER BY n DESC LIMIT 1) busiest`).Scan(&shard, &keys)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the busiest user's shard: %w", err)
	}
	port, err = c.placement(ctx, conn, shard)
	return shard, port, keys, err
}

func (c *Citus) placement(ctx context.Context, conn *pgx.Conn, shard int64) (int, error) {
	var port int
	if err := conn.QueryRow(ctx, "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $1", shard).Scan(&port); err != nil {
		return 0, fmt.Errorf("placement of shard %d: %w", shard, err)
	}
	return port, nil
}

func (c *Citus) worker(port int) (int, *Cluster, error) {
	for i, w := range c.workers {
		if w.port == port {
			return i, w, nil
		}
	}
	return 0, nil, fmt.Errorf("no worker on port %d", port)
}

// restartWorker stops the worker on port at once, starts it again
// citusWorkerDown later, and measures the time until the coordinator
// writes to shard there again.
func (c *Citus) restartWorker(ctx context.Context, conn *pgx.Conn, shard int64, port int) (Disruption, error) {
	i, w, err := c.worker(port)
	if err != nil {
		return Disruption{}, err
	}
	stopped := time.Now()
	if err := w.ctl(ctx, "stop", "-m", "immediate"); err != nil {
		return Disruption{}, err
	}
	select {
	case <-ctx.Done():
	case <-time.After(citusWorkerDown):
	}
	if err := w.ctl(ctx, "start"); err != nil {
		return Disruption{}, err
	}
	// A write to the shard's placement through the coordinator, whose
	// cached connections to the worker broke.
	for {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT success FROM run_command_on_placements('idempotency_keys',
			'UPDATE %s SET status = status WHERE false') WHERE shardid = $1`, shard).Scan(&ok)
		if err == nil && ok {
			break
		}
		select {
		case <-ctx.Done():
			return Disruption{}, fmt.Errorf("worker%d took no write again: %v", i+1, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return Disruption{What: fmt.Sprintf("worker%d restarted", i+1), Took: time.Since(stopped),
		Detail: fmt.Sprintf("holding the busiest user's shard %d; stopped -m immediate, started again %s later", shard, citusWorkerDown)}, nil
}

// moveShard moves shard, and the shards co-located with it, from the
// worker on port to the next one, while traffic flows, and checks that
// the coordinator places it there after.
func (c *Citus) moveShard(ctx context.Context, conn *pgx.Conn, shard int64, port, keys int) (Disruption, error) {
	i, from, err := c.worker(port)
	if err != nil {
		return Disruption{}, err
	}
	j := (i + 1) % len(c.workers)
	to := c.workers[j]
	start := time.Now()
	if _, err := conn.Exec(ctx, "SELECT citus_move_shard_placement($1, '127.0.0.1', $2, '127.0.0.1', $3, shard_transfer_mode => 'force_logical')",
		shard, from.port, to.port); err != nil {
		return Disruption{}, fmt.Errorf("move shard %d from worker%d to worker%d: %w", shard, i+1, j+1, err)
	}
	took := time.Since(start)
	now, err := c.placement(ctx, conn, shard)
	if err != nil {
		return Disruption{}, err
	}
	if now != to.port {
		return Disruption{}, fmt.Errorf("shard %d moved to worker%d (port %d) is placed on port %d", shard, j+1, to.port, now)
	}
	return Disruption{What: fmt.Sprintf("shard %d moved w%d→w%d", shard, i+1, j+1), Took: took,
		Detail: fmt.Sprintf("the busiest user's, %d keys, live, then placed on worker%d", keys, j+1)}, nil
}

// Close stops every node and removes its files.
func (c *Citus) Close() {
	for _, w := range append([]*Cluster{c.coord}, c.workers...) {
		if w != nil {
			w.Close()
		}
	}
}

// execSQL runs statements, one after the other, on a connection of its own.
func execSQL(ctx context.Context, dsn string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}
