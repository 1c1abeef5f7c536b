package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// keep is how many samples, minutes and sweeps the console remembers.
const keep = 120

// sample is the counts by state at one time.
type sample struct {
	At                                        time.Time
	Processing, Completed, Failed, Unfinished int64
}

// minute counts the requests of one minute by how they were answered.
type minute struct {
	At                 time.Time
	Replayed, Executed int64
}

// sweep is one batch of the sweeper.
type sweep struct {
	At       time.Time
	Deleted  int
	Duration time.Duration
	Err      string
}

// stats is what the console has seen since it started: the charts' data.
// It lives in memory; the store keeps everything a decision needs.
type stats struct {
	mu      sync.Mutex
	samples []sample // guarded by mu; oldest first, at most keep
	minutes []minute // guarded by mu; oldest first, at most keep
	sweeps  []sweep  // guarded by mu; oldest first, at most keep
}

func push[T any](s []T, v T) []T {
	if len(s) == keep {
		s = append(s[:0], s[1:]...)
	}
	return append(s, v)
}

// Observe counts an Event for the replay ratio chart: chain it into
// idem.Config.ObserveFunc with idem.ObserveAll.
func (c *Console) Observe(e idem.Event) {
	if e.Outcome != idem.OutcomeReplayed && e.Outcome != idem.OutcomeExecuted {
		return
	}
	at := time.Now().UTC().Truncate(time.Minute)
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	if n := len(c.stats.minutes); n == 0 || !c.stats.minutes[n-1].At.Equal(at) {
		c.stats.minutes = push(c.stats.minutes, minute{At: at})
	}
	m := &c.stats.minutes[len(c.stats.minutes)-1]
	if e.Outcome == idem.OutcomeReplayed {
		m.Replayed++
	} else {
		m.Executed++
	}
}

// ObserveSweep records a sweeper batch for the overview: chain it into
// sweeper.Config.ObserveFunc.
func (c *Console) ObserveSweep(b sweeper.Batch) {
	s := sweep{At: time.Now().UTC(), Deleted: b.Deleted, Duration: b.Duration}
	if b.Err != nil {
		s.Err = b.Err.Error()
	}
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	c.stats.sweeps = push(c.stats.sweeps, s)
}

// Run counts the records by state every SampleInterval, for the chart of
// states over time, until ctx ends; it returns ctx's error. Without it the
// chart has only the samples the overview takes when it is shown.
func (c *Console) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	for {
		if _, err := c.sample(ctx); err != nil && ctx.Err() == nil {
			c.log(ctx, slog.LevelWarn, "console: count keys", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sample counts the records by state and keeps the counts.
func (c *Console) sample(ctx context.Context) (store.KeyCounts, error) {
	if !c.caps.Search {
		return store.KeyCounts{}, nil
	}
	k, err := c.cfg.Store.CountKeys(ctx)
	if err != nil {
		return k, err
	}
	s := sample{At: time.Now().UTC(), Processing: k.Processing.N, Completed: k.Completed.N, Failed: k.Failed.N}
	for _, n := range k.Unfinished {
		s.Unfinished += n
	}
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	c.stats.samples = push(c.stats.samples, s)
	return k, nil
}

// snapshot copies what the charts draw.
func (c *Console) snapshot() (samples []sample, minutes []minute, sweeps []sweep) {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	return append([]sample(nil), c.stats.samples...), append([]minute(nil), c.stats.minutes...), append([]sweep(nil), c.stats.sweeps...)
}
