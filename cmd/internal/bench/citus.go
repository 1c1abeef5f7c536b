package bench

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/cmd/internal/dburl"
)

// citusSuffix names a variant's twin on the Citus coordinator.
const citusSuffix = " (citus)"

// cluster is a Citus coordinator's CPU meter and its workers, which a
// Citus variant's segment reads besides the coordinator.
type cluster struct {
	coordinator *cpuMeter
	workers     []*worker
}

// worker is one Citus worker: a pool on its database and its CPU meter.
type worker struct {
	pool *pgxpool.Pool
	cpu  *cpuMeter
}

// workerCounts are a worker's counters at one moment.
type workerCounts struct {
	Commits    int64 // pg_stat_database.xact_commit of its database
	Statements int64 // pg_stat_statements calls since the segment's reset; -1 without it
}

// WorkerSample is one worker's share of a segment: its transactions and
// statements per request of the segment (warm-up included), and its
// cluster's CPU milliseconds per measured request.
type WorkerSample struct {
	CommitsPerReq, StmtsPerReq, CPU float64
}

// citus is the Citus comparison (Config.CitusURL): each variant on the one
// PostgreSQL of DatabaseURL, then the same on the Citus coordinator, in
// every round, so that both see the same machine.
func (r *runner) citus(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	db, machine, err := r.open(ctx, "bench")
	if err != nil {
		return nil, err
	}
	defer r.dispose(ctx, db)
	// The operator's way: this build's paymentsd migrate --citus.
	cdb, err := newDatabase(ctx, cfg.CitusURL, "bench_citus", cfg.Paymentsd, cfg.Users, 4, "--citus")
	if err != nil {
		return nil, fmt.Errorf("on Citus: %w", err)
	}
	defer r.dispose(ctx, cdb)
	cl, err := openCluster(ctx, cdb, cfg.CitusWorkers)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	r.pgss = enablePgss(ctx, db.pool) && enablePgss(ctx, cdb.pool) && cl.enablePgss(ctx)
	r.cpu = newCPUMeter(ctx, db.pool)
	pg, err := r.citusVariants(ctx, db, "", nil)
	if err != nil {
		return nil, err
	}
	ci, err := r.citusVariants(ctx, cdb, citusSuffix, cl)
	if err != nil {
		return nil, err
	}
	var vs []*variant
	for i := range pg {
		vs = append(vs, pg[i], ci[i])
	}
	if vs, err = r.only(vs); err != nil {
		return nil, err
	}
	return r.measure(ctx, machine, vs, func(rep *Report) { rep.Citus = len(cl.workers) })
}

// citusVariants starts paymentsd in both modes and the bare server on db,
// seeds the replay keys, and returns fresh and replay in each mode and
// bare, their names ending in suffix; cl is db's Citus cluster, or nil.
func (r *runner) citusVariants(ctx context.Context, db *database, suffix string, cl *cluster) ([]*variant, error) {
	var vs []*variant
	for _, mode := range paymentsdModes {
		s, err := r.startPaymentsd(ctx, "paymentsd-"+mode+strings.TrimSpace(suffix), mode, db)
		if err != nil {
			return nil, err
		}
		seeds, err := seed(ctx, &variant{srv: s, db: db}, r.wl, r.cfg.ReplayKeys, r.cfg.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("seed %s%s: %w", mode, suffix, err)
		}
		vs = append(vs,
			&variant{name: "fresh-" + mode + suffix, kind: kindFresh, mode: mode, srv: s, db: db, citus: cl},
			&variant{name: "replay-" + mode + suffix, kind: kindReplay, mode: mode, srv: s, db: db, citus: cl,
				replay: func(rnd *mrand.Rand) request { return seeds[rnd.IntN(len(seeds))] }})
	}
	bare, err := r.startSelf(ctx, "bare"+strings.TrimSpace(suffix), "bare", db)
	if err != nil {
		return nil, err
	}
	return append(vs, &variant{name: "bare" + suffix, kind: kindBare, srv: bare, db: db, citus: cl}), nil
}

// openCluster connects to each worker's database (the coordinator's
// schema is there: Citus made it) and finds the CPU meters of the
// coordinator and the workers. Every node must be durable, as the one
// PostgreSQL is.
func openCluster(ctx context.Context, coordinator *database, urls []string) (*cluster, error) {
	cl := &cluster{coordinator: newCPUMeter(ctx, coordinator.pool)}
	for _, url := range append([]string{coordinator.base}, urls...) {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			cl.close()
			return nil, fmt.Errorf("Citus node %s: %w", dburl.Display(url), dburl.ScrubError(err, url))
		}
		var m Machine
		if err := m.fromDatabase(ctx, pool); err != nil || !m.durable() {
			pool.Close()
			cl.close()
			if err == nil {
				err = fmt.Errorf("fsync %s, synchronous_commit %s: not durable", m.Settings["fsync"], m.Settings["synchronous_commit"])
			}
			return nil, fmt.Errorf("Citus node %s: %w", dburl.Display(url), err)
		}
		if url == coordinator.base {
			pool.Close()
			continue
		}
		cl.workers = append(cl.workers, &worker{pool: pool, cpu: newCPUMeter(ctx, pool)})
	}
	return cl, nil
}

func (cl *cluster) close() {
	for _, w := range cl.workers {
		w.pool.Close()
	}
}

// enablePgss reports whether every worker has pg_stat_statements: a
// worker refuses CREATE EXTENSION (even IF NOT EXISTS), but the
// coordinator's enablePgss created it there too.
func (cl *cluster) enablePgss(ctx context.Context) bool {
	for _, w := range cl.workers {
		var ok bool
		err := w.pool.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'
   AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')`).Scan(&ok)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// counts reads each worker's counters, and resets its statements first
// when reset.
func (cl *cluster) counts(ctx context.Context, pgss, reset bool) ([]workerCounts, error) {
	out := make([]workerCounts, len(cl.workers))
	for i, w := range cl.workers {
		if pgss && reset {
			if err := resetPgss(ctx, w.pool); err != nil {
				return nil, err
			}
		}
		c, err := readCounters(ctx, w.pool, pgss && !reset)
		if err != nil {
			return nil, err
		}
		out[i].Statements = c.Statements
		if err := w.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).
			Scan(&out[i].Commits); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cpu reads each worker's cluster CPU seconds.
func (cl *cluster) cpu() []float64 {
	out := make([]float64, len(cl.workers))
	for i, w := range cl.workers {
		out[i] = w.cpu.clusterCPU()
	}
	return out
}

// workerSamples are each worker's share of a segment of total requests,
// measured of them in the window.
func workerSamples(before, after []workerCounts, cpuFrom, cpuTo []float64, total, measured int) []WorkerSample {
	out := make([]WorkerSample, len(before))
	for i := range out {
		w := WorkerSample{StmtsPerReq: -1}
		if total > 0 {
			w.CommitsPerReq = float64(after[i].Commits-before[i].Commits) / float64(total)
			if after[i].Statements >= 0 {
				w.StmtsPerReq = float64(after[i].Statements) / float64(total)
			}
		}
		if measured > 0 {
			w.CPU = (cpuTo[i] - cpuFrom[i]) * 1000 / float64(measured)
		}
		out[i] = w
	}
	return out
}

// citusRatios set each Citus variant against the same on one PostgreSQL,
// and each side's fresh against its own bare server.
func (rep *Report) citusRatios() {
	for _, r := range rep.Rows {
		if pg, ok := strings.CutSuffix(r.Variant, citusSuffix); ok {
			rep.ratio(pg+": Citus / one PostgreSQL", r.Variant, pg, "", 0)
		}
	}
	for _, mode := range paymentsdModes {
		rep.ratio("fresh/bare, "+mode+", one PostgreSQL", "fresh-"+mode, "bare", "", 0)
		rep.ratio("fresh/bare, "+mode+", Citus", "fresh-"+mode+citusSuffix, "bare"+citusSuffix, "", 0)
	}
}

// citusMarkdown is the Citus run's table of the workers: each one's
// transactions, statements and CPU per request of the cluster, and the
// cluster's rate at which that CPU fills one core of the worker.
func (rep *Report) citusMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\nThe %d Citus workers, per request (medians over the rounds; transactions and statements counted on each worker's database, "+
		"CPU of each worker's whole cluster over the measured window, per request of the whole cluster; "+
		"\"cluster req/s that fill one core of it\" is 1000 ÷ that CPU):\n\n", rep.Citus)
	b.WriteString("| variant | worker | transactions/req | statements/req | CPU ms/req | share of the workers' transactions | cluster req/s that fill one core of it |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Rows {
		var commits float64
		for _, w := range r.Workers {
			commits += w.CommitsPerReq
		}
		for i, w := range r.Workers {
			share, rate, stmts := "–", "–", "–"
			if commits > 0 {
				share = fmt.Sprintf("%.0f %%", 100*w.CommitsPerReq/commits)
			}
			if w.CommitsPerReq >= 0.1 && w.CPU > 0 { // the workers served it (not the replay cache)
				rate = fmt.Sprintf("%.0f", 1000/w.CPU)
			}
			if w.StmtsPerReq >= 0 {
				stmts = fmt.Sprintf("%.2f", w.StmtsPerReq)
			}
			fmt.Fprintf(b, "| %s | %d | %.2f | %s | %.2f | %s | %s |\n", r.Variant, i+1, w.CommitsPerReq, stmts, w.CPU, share, rate)
		}
	}
}
