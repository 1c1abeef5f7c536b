package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/sweeper"
)

// sweepTarget is the most the sweep may multiply the p99 of the requests
// it runs beside.
const sweepTarget = 1.5

// SweepResult is the sweep run's result (Report.Sweep).
type SweepResult struct {
	Rows, Expired int          // preloaded records, and of them past retention
	Phases        []SweepPhase // the baseline, the windows without the sweep, those with it
	Ratios        []SweepRatio
	Deleted       int     // what `paymentsd keys sweep` printed
	ActiveSeconds float64 // the time it ran: its windows, its start-up included
	WallSeconds   float64 // from its start to its exit, stopped windows included
	RowsPerSecond float64 // Deleted / ActiveSeconds
	// Unexpected counts, by outcome, the answers other than a 201 (replayed
	// exactly for the replays), warm-up included.
	Unexpected map[string]int
	Check      SweepCheck
}

// SweepPhase is one kind of window.
type SweepPhase struct {
	Name      string
	Windows   int
	Seconds   float64
	WALPerSec float64        // bytes a second, the whole server's
	Requests  []SweepLatency // all, fresh, replay
}

// SweepLatency is the latency of one kind of request in one kind of
// window, from when each request was due.
type SweepLatency struct {
	Kind          string
	Count         int
	Unexpected    int
	P50, P99, Max float64 // ms
}

// SweepRatio is a ratio of latencies between two kinds of window.
type SweepRatio struct {
	Name   string
	Value  float64
	Target string  // "≤ 1.5", "" for none
	Max    float64 // the largest value that meets it
	Lo, Hi float64 // for a median over pairs of windows: their range
}

func (r SweepRatio) verdict() string {
	switch {
	case r.Target == "":
		return "(reported)"
	case r.Value <= r.Max:
		return "met"
	}
	return "**missed**"
}

// sweepSettings is the sweep run's Report.Settings: its parameters, and
// the preload that took took and left a key table of size.
func sweepSettings(cfg Config, took time.Duration, size string) string {
	return fmt.Sprintf(
		"paymentsd in atomic-deferred mode with its sweeper off (--sweep-interval 0); an open-loop load of %d requests a second "+
			"(each sent when due, its latency counted from then), half fresh POST /v1/transactions with new keys, half "+
			"replays of live preloaded keys (keep-alive HTTP/1.1, up to %d connections), over %d users; %v of warm-up, "+
			"%v of baseline, then `paymentsd keys sweep` (batch %d, pause %v) in %v windows alternating with %v windows "+
			"where it is stopped (SIGSTOP/SIGCONT), until it exits; a request counts in the window it falls due in; "+
			"GOMAXPROCS server %d, generator %d; the key table was preloaded with %d COMPLETED records, %d of them past "+
			"retention, in %v (%s with its indexes), then vacuumed, analyzed and checkpointed",
		cfg.SweepRate, openLoopConns, cfg.Users, cfg.Warmup, cfg.SweepBaseline, sweeper.DefaultBatchSize,
		sweeper.DefaultPause, cfg.SweepWindow, cfg.SweepWindow, cfg.ServerProcs, cfg.ClientProcs, cfg.SweepRows,
		cfg.SweepExpired, took.Round(time.Second), size)
}

// newSweepResult sums up a sweep run: the answers got, the phases of
// clock, the count the sweep deleted and the key table's check.
func newSweepResult(cfg Config, got []answer, clock *phaseClock, deleted int, check SweepCheck) *SweepResult {
	on := clock.time[phaseOn].Seconds()
	res := &SweepResult{Rows: cfg.SweepRows, Expired: cfg.SweepExpired, Deleted: deleted, Check: check,
		ActiveSeconds: on, WallSeconds: on + clock.time[phaseOff].Seconds(), Unexpected: map[string]int{}}
	if on > 0 {
		res.RowsPerSecond = float64(deleted) / on
	}
	for _, a := range got {
		if !a.ok {
			res.Unexpected[a.label]++
		}
	}
	for _, p := range []struct {
		ph   phase
		name string
	}{{phaseBaseline, "baseline"}, {phaseOff, "without the sweep"}, {phaseOn, "with the sweep"}} {
		secs := clock.time[p.ph].Seconds()
		sp := SweepPhase{Name: p.name, Windows: clock.windows[p.ph], Seconds: secs}
		if secs > 0 {
			sp.WALPerSec = clock.wal[p.ph] / secs
		}
		for _, kind := range []string{"all", "fresh", "replay"} {
			sp.Requests = append(sp.Requests, latencyOf(got, func(a answer) bool { return clock.kinds[a.window] == p.ph }, kind))
		}
		res.Phases = append(res.Phases, sp)
	}
	p99 := func(l *SweepLatency) float64 { return l.P99 }
	p50 := func(l *SweepLatency) float64 { return l.P50 }
	res.ratio("p99, all requests: with the sweep / without", "with the sweep", "without the sweep", "all", p99, true)
	res.pairs(got, clock.kinds)
	res.ratio("p99, fresh: with / without", "with the sweep", "without the sweep", "fresh", p99, false)
	res.ratio("p99, replay: with / without", "with the sweep", "without the sweep", "replay", p99, false)
	res.ratio("p50, all requests: with / without", "with the sweep", "without the sweep", "all", p50, false)
	res.ratio("p99, all requests: with the sweep / baseline", "with the sweep", "baseline", "all", p99, false)
	res.ratio("p99, all requests: without the sweep / baseline", "without the sweep", "baseline", "all", p99, false)
	return res
}

// latencyOf sums up the answers of kind (all, fresh or replay) that are
// in.
func latencyOf(got []answer, in func(answer) bool, kind string) SweepLatency {
	l := SweepLatency{Kind: kind}
	var lat []time.Duration
	for _, a := range got {
		if !in(a) || (kind == "fresh" && a.replay) || (kind == "replay" && !a.replay) {
			continue
		}
		lat = append(lat, a.lat)
		if !a.ok {
			l.Unexpected++
		}
	}
	slices.Sort(lat)
	l.Count = len(lat)
	if len(lat) > 0 {
		l.P50, l.P99, l.Max = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)), ms(lat[len(lat)-1])
	}
	return l
}

// ratio adds f(a)/f(b) for the requests of kind in phases a and b; with
// target, against sweepTarget.
func (s *SweepResult) ratio(name, a, b, kind string, f func(*SweepLatency) float64, target bool) {
	la, lb := s.latency(a, kind), s.latency(b, kind)
	if la == nil || lb == nil || f(lb) == 0 {
		return
	}
	r := SweepRatio{Name: name, Value: f(la) / f(lb)}
	if target {
		r.Target, r.Max = fmt.Sprintf("≤ %.1f", sweepTarget), sweepTarget
	}
	s.Ratios = append(s.Ratios, r)
}

// pairs adds the median, over each window with the sweep and the window
// without it that follows, of the ratio of their p99s: the comparison least
// moved by a burst of noise that falls on a few windows.
func (s *SweepResult) pairs(got []answer, kinds []phase) {
	var xs []float64
	for i := 0; i+1 < len(kinds); i++ {
		if kinds[i] != phaseOn || kinds[i+1] != phaseOff {
			continue
		}
		on := latencyOf(got, func(a answer) bool { return a.window == i }, "all")
		off := latencyOf(got, func(a answer) bool { return a.window == i+1 }, "all")
		if on.Count > 0 && off.P99 > 0 {
			xs = append(xs, on.P99/off.P99)
		}
	}
	if len(xs) == 0 {
		return
	}
	s.Ratios = append(s.Ratios, SweepRatio{Name: fmt.Sprintf("p99, all requests: with / without, median of %d pairs of adjacent windows", len(xs)),
		Value: median(xs), Lo: slices.Min(xs), Hi: slices.Max(xs)})
}

func (s *SweepResult) latency(phaseName, kind string) *SweepLatency {
	for i := range s.Phases {
		if s.Phases[i].Name != phaseName {
			continue
		}
		for j := range s.Phases[i].Requests {
			if s.Phases[i].Requests[j].Kind == kind {
				return &s.Phases[i].Requests[j]
			}
		}
	}
	return nil
}

// failures is why the run failed: an unexpected answer, a deleted count
// other than expired, or a key table that is not what it must be.
func (s *SweepResult) failures(expired int) error {
	var errs []error
	if n := s.unexpected(); n > 0 {
		errs = append(errs, fmt.Errorf("%d unexpected answers: %s", n, outcomes(s.Unexpected)))
	}
	if s.Deleted != expired {
		errs = append(errs, fmt.Errorf("the sweep deleted %d records, not the %d expired ones", s.Deleted, expired))
	}
	if err := s.Check.err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench: the sweep run failed: %w", errors.Join(errs...))
	}
	return nil
}

func (s *SweepResult) unexpected() int {
	n := 0
	for _, v := range s.Unexpected {
		n += v
	}
	return n
}

// markdown writes the run's tables into b.
func (s *SweepResult) markdown(b *strings.Builder) {
	b.WriteString("| phase | windows | seconds | WAL MB/s | requests | count | p50 ms | p99 ms | max ms | unexpected |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range s.Phases {
		for i, l := range p.Requests {
			head := "| | | | "
			if i == 0 {
				head = fmt.Sprintf("| %s | %d | %.1f | %.2f ", p.Name, p.Windows, p.Seconds, p.WALPerSec/1e6)
			}
			fmt.Fprintf(b, "%s| %s | %d | %.2f | %.2f | %.2f | %d |\n", head, l.Kind, l.Count, l.P50, l.P99, l.Max, l.Unexpected)
		}
	}
	b.WriteString("\n| ratio | value | pair by pair | target | |\n| --- | ---: | ---: | --- | --- |\n")
	for _, r := range s.Ratios {
		pairs := ""
		if r.Hi > 0 {
			pairs = fmt.Sprintf("%.2f–%.2f", r.Lo, r.Hi)
		}
		fmt.Fprintf(b, "| %s | %.2f | %s | %s | %s |\n", r.Name, r.Value, pairs, r.Target, r.verdict())
	}
	fmt.Fprintf(b, "\n| the sweep (`paymentsd keys sweep`) | |\n| --- | ---: |\n"+
		"| records deleted | %d of %d expired |\n| time sweeping (its windows, start-up included) | %.1f s |\n"+
		"| rate | %.0f records/s |\n| wall clock, stopped windows included | %.1f s |\n",
		s.Deleted, s.Expired, s.ActiveSeconds, s.RowsPerSecond, s.WallSeconds)
	c := s.Check
	fmt.Fprintf(b, "\n| check, after the run | found | want |\n| --- | ---: | ---: |\n"+
		"| expired records left (SQL) | %d | 0 |\n| live preloaded records (SQL) | %d | %d |\n"+
		"| records of fresh requests (SQL) | %d | %d (their 201s) |\n| unexpected answers | %d | 0 |\n",
		c.ExpiredLeft, c.Live, c.LiveWant, c.Fresh, c.FreshWant, s.unexpected())
	if len(s.Unexpected) > 0 {
		fmt.Fprintf(b, "\nUnexpected answers: %s.\n", outcomes(s.Unexpected))
	}
}
