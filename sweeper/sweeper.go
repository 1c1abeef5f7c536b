// Package sweeper deletes idempotency records past their retention, in
// bounded, paced batches, so that the key table stays the size of its TTL
// without a long lock or a burst of I/O.
//
//	sw, err := sweeper.New(store, sweeper.Config{}) // pgstore or sqlitestore
//	go sw.Run(ctx)                                  // every replica may run it
//
// Every record whose expires_at has passed goes, whatever its status (an
// abandoned PROCESSING record too), except a claim whose lease is still live:
// a request running past retention keeps its key. A round deletes batches,
// one short transaction each, with Pause between them, until a batch comes
// back short; Run starts a round every Interval. A round's first batch is
// BatchSize; while batches come back full (a backlog) and quick, each is
// twice the last, up to MaxBatchSize, and one slower than MaxBatchTime
// halves the next: the sweep keeps up with a busy service by itself, and
// a batch never holds its locks for long. When several replicas run a
// sweeper, the store's sweep lock lets one batch run at a time (per
// partition, on a partitioned pgstore table) and the others skip their
// round (store.ErrSweepBusy).
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idem-dev/idem/store"
)

// Defaults of Config.
const (
	DefaultInterval     = time.Minute
	DefaultBatchSize    = 1000
	DefaultMaxBatchSize = 16 * DefaultBatchSize
	DefaultMaxBatchTime = 250 * time.Millisecond
	DefaultPause        = 100 * time.Millisecond
)

// Config configures a Sweeper. Its zero value is valid; every field
// documents its default.
type Config struct {
	// Interval is the time from the end of one round of Run to the start of
	// the next. Default 1m.
	Interval time.Duration

	// BatchSize is the most records the first batch of a round deletes, in
	// one transaction, and the least any batch may delete. Default 1000.
	BatchSize int

	// MaxBatchSize is the most records a batch grows to while the batches
	// before it came back full in less than half of MaxBatchTime. Default
	// 16000 (or BatchSize, if larger); set it to BatchSize for batches of
	// one size.
	MaxBatchSize int

	// MaxBatchTime bounds how long a batch holds its row locks: a batch
	// that took longer halves the next one (down to BatchSize). Default
	// 250ms.
	MaxBatchTime time.Duration

	// Pause is the wait between two batches of a round, which leaves the
	// database's I/O and WAL to the requests. Default 100ms; a negative
	// Pause means none.
	Pause time.Duration

	// ObserveFunc, when set, is called after every batch: the hook for
	// metrics (idemprom.Metrics.ObserveSweep). It must not block. Default
	// none.
	ObserveFunc func(Batch)

	// Logger, when set, gets one record per round of Run that deleted
	// something (Info) or failed (Error). Default none.
	Logger *slog.Logger
}

// Batch describes one batch, for Config.ObserveFunc.
type Batch struct {
	Deleted  int
	Duration time.Duration
	// Err is why the batch deleted nothing: store.ErrSweepBusy when another
	// process holds the sweep lock, else a store error.
	Err error
}

// Sweeper deletes expired records from a store.
type Sweeper struct {
	store store.Store
	cfg   Config
}

// New returns a Sweeper on store, which must delete expired records
// (store.Capabilities.Sweep). It fails on an invalid Config, never later.
func New(st store.Store, cfg Config) (*Sweeper, error) {
	switch {
	case st == nil:
		return nil, errors.New("sweeper: New needs a store")
	case !st.Capabilities().Sweep:
		return nil, errors.New("sweeper: the store cannot delete expired records (store.Capabilities.Sweep)")
	}
	var errs []error
	switch {
	case cfg.Interval == 0:
		cfg.Interval = DefaultInterval
	case cfg.Interval < 0:
		errs = append(errs, fmt.Errorf("sweeper: Interval must be positive, got %v", cfg.Interval))
	}
	switch {
	case cfg.BatchSize == 0:
		cfg.BatchSize = DefaultBatchSize
	case cfg.BatchSize < 0:
		errs = append(errs, fmt.Errorf("sweeper: BatchSize must be positive, got %d", cfg.BatchSize))
	}
	switch {
	case cfg.MaxBatchSize == 0:
		cfg.MaxBatchSize = max(DefaultMaxBatchSize, cfg.BatchSize)
	case cfg.MaxBatchSize < cfg.BatchSize:
		errs = append(errs, fmt.Errorf("sweeper: MaxBatchSize must be at least BatchSize (%d), got %d", cfg.BatchSize, cfg.MaxBatchSize))
	}
	switch {
	case cfg.MaxBatchTime == 0:
		cfg.MaxBatchTime = DefaultMaxBatchTime
	case cfg.MaxBatchTime < 0:
		errs = append(errs, fmt.Errorf("sweeper: MaxBatchTime must be positive, got %v", cfg.MaxBatchTime))
	}
	switch {
	case cfg.Pause == 0:
		cfg.Pause = DefaultPause
	case cfg.Pause < 0:
		cfg.Pause = 0
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Sweeper{store: st, cfg: cfg}, nil
}

// Config returns the configuration in force, defaults filled in (a
// negative Pause reads as zero).
func (s *Sweeper) Config() Config { return s.cfg }

// Run sweeps one round now and then one every Interval, until ctx is done;
// it then returns ctx's error. A failed round does not stop it: the next
// round tries again (watch the Logger or ObserveFunc).
func (s *Sweeper) Run(ctx context.Context) error {
	for {
		start := time.Now()
		n, err := s.Once(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !errors.Is(err, store.ErrSweepBusy):
			s.log(slog.LevelError, "sweep failed", n, start, slog.String("error", err.Error()))
		case n > 0:
			s.log(slog.LevelInfo, "swept expired idempotency keys", n, start)
		}
		t := time.NewTimer(s.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (s *Sweeper) log(level slog.Level, msg string, n int, start time.Time, attrs ...slog.Attr) {
	if s.cfg.Logger == nil {
		return
	}
	attrs = append(attrs, slog.Int("deleted", n), slog.Duration("duration", time.Since(start)))
	s.cfg.Logger.LogAttrs(context.Background(), level, msg, attrs...)
}

// Once sweeps one round: batches with Pause between them, from BatchSize
// and growing while they come back full (see the package doc), until a
// batch deletes fewer than it could. It returns how many records it
// deleted. When another process holds the sweep lock it stops and returns
// an error that is store.ErrSweepBusy: that process sweeps.
func (s *Sweeper) Once(ctx context.Context) (int, error) {
	total, size := 0, s.cfg.BatchSize
	for {
		start := time.Now()
		deleted, err := s.store.DeleteExpired(ctx, size)
		took := time.Since(start)
		if s.cfg.ObserveFunc != nil {
			s.cfg.ObserveFunc(Batch{Deleted: len(deleted), Duration: took, Err: err})
		}
		total += len(deleted)
		if err != nil {
			return total, fmt.Errorf("sweep: %w", err)
		}
		if len(deleted) < size {
			return total, nil
		}
		size = s.nextSize(size, took)
		if s.cfg.Pause > 0 {
			t := time.NewTimer(s.cfg.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return total, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// nextSize is the batch after a full one of size that took took.
func (s *Sweeper) nextSize(size int, took time.Duration) int {
	switch {
	case took > s.cfg.MaxBatchTime:
		return max(size/2, s.cfg.BatchSize)
	case took < s.cfg.MaxBatchTime/2:
		return min(size*2, s.cfg.MaxBatchSize)
	}
	return size
}
