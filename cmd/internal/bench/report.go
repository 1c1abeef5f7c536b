package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report is a run's result: the samples of every round and, per variant,
// their medians.
type Report struct {
	Machine  Machine
	Settings string // the run's parameters, one line
	Growth   bool
	Gateway  bool         // the gateway run's (Config.GatewayOnly)
	Citus    int          `json:",omitempty"` // the Citus run's (Config.CitusURL): its workers
	Sweep    *SweepResult `json:",omitempty"` // the sweep run's, instead of the three below
	Rows     []Row        `json:",omitempty"`
	Ratios   []Ratio      `json:",omitempty"`
	Samples  []*sample    `json:",omitempty"`
}

// Row is one variant over all rounds.
type Row struct {
	Variant        string
	RPS            float64 // median over the rounds
	RPSMin, RPSMax float64
	P50, P99       float64 // ms, medians of the rounds' percentiles
	Requests, Bad  int     // measured, all rounds
	StmtsPerReq    float64 // medians; -1 when unknown
	TripsPerReq    float64 // round trips to PostgreSQL; -1 when unknown
	// PeerTripsPerReq are the peer's (the gateway's upstream's); -1 when
	// unknown, 0 in reports from before it.
	PeerTripsPerReq float64 `json:",omitempty"`
	WALPerReq       float64
	SyncsPerReq     float64
	CPU             cpuTimes // CPU ms per request, medians
	Peer            string   `json:",omitempty"` // the process CPU.Peer is of: bankd, nats-server
	Outcomes        map[string]int
	// Workers are each Citus worker's figures, medians; a variant on one
	// PostgreSQL has none.
	Workers []WorkerSample `json:",omitempty"`
	// Effects is summed over the rounds; "Storm" in the JSON, as in the
	// reports from before the doors, so that Rewrite reads those.
	Effects *effectCheck `json:"Storm"`
}

// Ratio is a figure a target is stated in.
type Ratio struct {
	Name   string
	Value  float64
	Target string  // "≥ 0.85", "" for none
	Min    float64 // the least value that meets it; 0 with no target
	Lo, Hi float64 // the same ratio round by round: its range
}

func (r Ratio) verdict() string {
	switch {
	case r.Target == "":
		return "(reported)"
	case r.Value >= r.Min:
		return "met"
	}
	return "**missed**"
}

func newReport(cfg Config, m Machine, vs []*variant, samples []*sample) *Report {
	rep := &Report{Machine: m, Samples: samples, Growth: cfg.Growth, Gateway: cfg.GatewayOnly,
		Settings: fmt.Sprintf("%d rounds; per variant and round %v warm-up, then %v measured; %d closed-loop clients "+
			"(keep-alive HTTP/1.1; storms: %d clients per key); %d users; %d replay keys; GOMAXPROCS server %d, generator %d",
			cfg.Rounds, cfg.Warmup, cfg.Duration, cfg.Concurrency, cfg.StormClients, cfg.Users, cfg.ReplayKeys,
			cfg.ServerProcs, cfg.ClientProcs)}
	for _, v := range vs {
		row := Row{Variant: v.name, Outcomes: map[string]int{}}
		var rps, p50, p99, stmts, trips, ptrips, wal, syncs, cs, cp, cg, co []float64
		var workers [][3][]float64 // per worker: transactions, statements, CPU
		for _, s := range samples {
			if s.Variant != v.name {
				continue
			}
			for i, w := range s.Workers {
				if i == len(workers) {
					workers = append(workers, [3][]float64{})
				}
				f := &workers[i]
				f[0], f[1], f[2] = append(f[0], w.CommitsPerReq), append(f[1], w.StmtsPerReq), append(f[2], w.CPU)
			}
			rps, p50, p99 = append(rps, s.RPS), append(p50, ms(s.P50)), append(p99, ms(s.P99))
			stmts, wal, syncs = append(stmts, s.StmtsPerReq), append(wal, s.WALPerReq), append(syncs, s.SyncsPerReq)
			trips, ptrips = append(trips, s.TripsPerReq), append(ptrips, s.PeerTripsPerReq)
			cs, cp, cg, co = append(cs, s.CPU.Server), append(cp, s.CPU.Postgres), append(cg, s.CPU.Generator), append(co, s.CPU.Peer)
			row.Requests += s.Measured
			row.Bad += s.Bad
			for k, n := range s.Outcomes {
				row.Outcomes[k] += n
			}
			if s.Effects != nil {
				if row.Effects == nil {
					row.Effects = &effectCheck{}
				}
				row.Effects.add(s.Effects)
			}
		}
		if len(rps) == 0 {
			continue
		}
		row.RPS, row.P50, row.P99 = median(rps), median(p50), median(p99)
		row.RPSMin, row.RPSMax = slices.Min(rps), slices.Max(rps)
		row.StmtsPerReq, row.WALPerReq, row.SyncsPerReq = median(stmts), median(wal), median(syncs)
		row.TripsPerReq, row.PeerTripsPerReq = median(trips), median(ptrips)
		row.CPU = cpuTimes{Server: median(cs), Postgres: median(cp), Generator: median(cg), Peer: median(co)}
		if v.peer != nil {
			row.Peer = v.peer.name
		}
		for _, f := range workers {
			row.Workers = append(row.Workers, WorkerSample{CommitsPerReq: median(f[0]), StmtsPerReq: median(f[1]), CPU: median(f[2])})
		}
		rep.Rows = append(rep.Rows, row)
	}
	switch {
	case cfg.Growth:
		rep.growthRatios()
	case cfg.GatewayOnly:
		rep.gatewayRatios()
	case cfg.CitusURL != "":
		rep.citusRatios()
	default:
		rep.mainRatios()
	}
	return rep
}

func (rep *Report) row(name string) *Row {
	for i := range rep.Rows {
		if rep.Rows[i].Variant == name {
			return &rep.Rows[i]
		}
	}
	return nil
}

// ratio adds a/b of the median throughputs, with the range of the same
// ratio round by round.
func (rep *Report) ratio(name, a, b, target string, least float64) {
	ra, rb := rep.row(a), rep.row(b)
	if ra == nil || rb == nil || rb.RPS == 0 {
		return
	}
	r := Ratio{Name: name, Value: ra.RPS / rb.RPS, Target: target, Min: least}
	first := true
	for _, sa := range rep.Samples {
		if sa.Variant != a {
			continue
		}
		for _, sb := range rep.Samples {
			if sb.Variant == b && sb.Round == sa.Round && sb.RPS > 0 {
				x := sa.RPS / sb.RPS
				if first || x < r.Lo {
					r.Lo = x
				}
				if first || x > r.Hi {
					r.Hi = x
				}
				first = false
			}
		}
	}
	rep.Ratios = append(rep.Ratios, r)
}

func (rep *Report) mainRatios() {
	rep.ratio("fresh/bare, atomic-deferred", "fresh-atomic-deferred", "bare", "≥ 0.85", 0.85)
	rep.ratio("fresh/bare, leased", "fresh-leased", "bare", "", 0)
	// Leased is the way every payout and every call to a provider holds
	// its key: on the same handler it costs a second durable commit.
	rep.ratio("fresh, leased/atomic-deferred", "fresh-leased", "fresh-atomic-deferred", "≥ 0.85", 0.85)
	rep.ratio("fresh/ceiling, atomic-deferred", "fresh-atomic-deferred", "ceiling", "≥ 0.75", 0.75)
	rep.ratio("fresh/ceiling, leased", "fresh-leased", "ceiling", "", 0)
	// No idempotency at all reaches only this share of the ceiling: the
	// HTTP service and its general handler cost it, and fresh/ceiling can
	// never exceed it.
	rep.ratio("bare/ceiling (a bound on fresh/ceiling)", "bare", "ceiling", "", 0)
	rep.ratio("replay/fresh, atomic-deferred", "replay-atomic-deferred", "fresh-atomic-deferred", "≥ 3", 3)
	rep.ratio("replay/fresh, leased", "replay-leased", "fresh-leased", "≥ 3", 3)
	rep.ratio("fresh/bare, atomic-deferred, no replay cache", "fresh-atomic-deferred (no cache)", "bare", "", 0)
	rep.ratio("replay/fresh, atomic-deferred, no replay cache", "replay-atomic-deferred (no cache)", "fresh-atomic-deferred (no cache)", "", 0)
	rep.ratio("replay/fresh, leased, no replay cache", "replay-leased (no cache)", "fresh-leased (no cache)", "", 0)
	rep.gatewayRatios()
	rep.doorRatios()
	rep.trivialRatios()
	rep.baselineRatios()
}

// baselineRatios set each variant against its baseline's ("… (baseline)",
// Config.Baseline): not slower. Within 5 % counts as not slower, the
// spread of one variant's rounds on a shared machine.
func (rep *Report) baselineRatios() {
	for _, r := range rep.Rows {
		if current, ok := strings.CutSuffix(r.Variant, " (baseline)"); ok {
			rep.ratio(current+": this build / baseline", current, r.Variant, "≥ 0.95 (not slower)", 0.95)
		}
	}
}

func (rep *Report) growthRatios() {
	for _, mode := range paymentsdModes {
		rep.ratio("fresh-"+mode+": 10M rows / empty", "fresh-"+mode+"@10M", "fresh-"+mode+"@empty", "≥ 0.90", 0.90)
		rep.ratio("replay-"+mode+" (recent keys): 10M rows / empty", "replay-"+mode+"@10M", "replay-"+mode+"@empty", "≥ 0.90", 0.90)
		rep.ratio("replay-any-"+mode+" (any of 10M keys) / replay on the empty table", "replay-any-"+mode+"@10M", "replay-"+mode+"@empty", "", 0)
	}
}

// names are the report's file name, without extension, and its title.
func (rep *Report) names() (name, title string) {
	switch {
	case rep.Growth:
		return "growth", "Growth benchmark"
	case rep.Gateway:
		return "gateway", "Gateway benchmark"
	case rep.Sweep != nil:
		return "sweep", "Sweep benchmark"
	case rep.Citus > 0:
		return "citus", "Citus benchmark"
	}
	return "results", "Benchmark"
}

// write saves results.md (growth.md, sweep.md), its JSON and its charts in
// dir.
func (rep *Report) write(dir, prefix string) error {
	name, _ := rep.names()
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(rep.Markdown(prefix)), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		return err
	}
	if st := rep.Statements(); st != "" {
		st = "# SQL statements per request (pg_stat_statements, last round)\n\n" + st
		if err := os.WriteFile(filepath.Join(dir, name+"-statements.md"), []byte(st), 0o644); err != nil {
			return err
		}
	}
	return rep.charts(dir, name)
}

// Markdown is the report as Markdown; chart links are relative to prefix.
func (rep *Report) Markdown(prefix string) string {
	var b strings.Builder
	m := rep.Machine
	name, title := rep.names()
	fmt.Fprintf(&b, "## %s: %s\n\n", title, m.Date)
	if !m.durable() {
		b.WriteString("**Warning: this database does not wait for the disk on commit (fsync or synchronous_commit off); the figures overstate throughput.**\n\n")
	}
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, Linux %s, %s, %s; ", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go, m.Postgres)
	keys := make([]string, 0, len(m.Settings))
	for k := range m.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", k, m.Settings[k])
	}
	fmt.Fprintf(&b, ". Load average before %s, after %s. The generator, the servers and PostgreSQL share these CPUs.\n\n", m.LoadBefore, m.LoadAfter)
	fmt.Fprintf(&b, "Run: %s.\n\n", rep.Settings)
	if rep.Sweep != nil {
		rep.Sweep.markdown(&b)
		return b.String()
	}
	b.WriteString("| variant | req/s (median) | req/s range | p50 ms | p99 ms | measured | unexpected | SQL stmts/req | round trips/req | WAL bytes/req | WAL flushes/req | CPU ms/req: server, PostgreSQL, generator (, bank, broker or upstream) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	known := func(x float64) string {
		if x < 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", x)
	}
	for _, r := range rep.Rows {
		peer := ""
		if r.Peer != "" {
			peer = fmt.Sprintf(", %s %.2f", r.Peer, r.CPU.Peer)
		}
		trips := known(r.TripsPerReq)
		if r.Peer != "" && r.PeerTripsPerReq > 0 {
			trips += fmt.Sprintf(" + %s %.1f", r.Peer, r.PeerTripsPerReq)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f–%.0f | %.2f | %.2f | %d | %d | %s | %s | %.0f | %.2f | %.2f, %.2f, %.2f%s |\n",
			r.Variant, r.RPS, r.RPSMin, r.RPSMax, r.P50, r.P99, r.Requests, r.Bad, known(r.StmtsPerReq), trips,
			r.WALPerReq, r.SyncsPerReq, r.CPU.Server, r.CPU.Postgres, r.CPU.Generator, peer)
	}
	b.WriteString("\n| ratio (of the medians) | value | round by round | target | |\n| --- | ---: | ---: | --- | --- |\n")
	for _, r := range rep.Ratios {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f–%.2f | %s | %s |\n", r.Name, r.Value, r.Lo, r.Hi, r.Target, r.verdict())
	}
	if rep.Citus > 0 {
		rep.citusMarkdown(&b)
	}
	checked := false
	for _, r := range rep.Rows {
		if r.Effects != nil {
			if !checked {
				fmt.Fprintf(&b, "\n| effects (storms, and every key of the variants checked) | keys | executions | double effects | lost effects | business nets fired | replay bodies differing | answers |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
				checked = true
			}
			s := r.Effects
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", r.Variant, s.Keys, s.Executed, s.DoubleEffects,
				s.LostEffects, s.NetFired, s.BodyMismatch, outcomes(r.Outcomes))
		}
	}
	fmt.Fprintf(&b, "\n![throughput](%s%s-throughput.png)\n![latency](%s%s-latency.png)\n", prefix, name, prefix, name)
	return b.String()
}

func outcomes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// Statements writes the pg_stat_statements profile of each variant's last
// round: the statements by calls.
func (rep *Report) Statements() string {
	var b strings.Builder
	for _, s := range rep.Samples {
		statementTable(&b, s.Variant, s, s.Top)
		statementTable(&b, s.Variant+", on the first Citus worker (calls per request of the cluster)", s, s.WorkerTop)
	}
	return b.String()
}

// statementTable writes one profile, top, of sample s under title.
func statementTable(b *strings.Builder, title string, s *sample, top []topStatement) {
	if len(top) == 0 {
		return
	}
	fmt.Fprintf(b, "### %s (round %d, %d requests)\n\n| calls/req | mean ms | statement |\n| ---: | ---: | --- |\n", title, s.Round, s.Total)
	for _, t := range top {
		q := t.Query
		if len(q) > 140 {
			q = q[:140] + "…"
		}
		q = strings.ReplaceAll(q, "|", "\\|")
		fmt.Fprintf(b, "| %.2f | %.3f | `%s` |\n", float64(t.Calls)/float64(max(s.Total, 1)), t.MeanMS, q)
	}
	b.WriteString("\n")
}

// Rewrite reads a report's JSON (results.json, growth.json or sweep.json)
// and writes its Markdown, statements and charts again beside it: for a
// change to the report's layout without a new run.
func Rewrite(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, rep.write(filepath.Dir(path), "")
}
