package bench

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// TestWorkerSamples checks the figures the Citus report quotes for each
// worker: its transactions and statements per request of the segment, its
// CPU per measured request, its share of the workers' transactions, and
// the cluster's rate that fills one core of it, left out where the
// workers did not serve the requests.
func TestWorkerSamples(t *testing.T) {
	before := []workerCounts{{Commits: 100}, {Commits: 1000}}
	after := []workerCounts{{Commits: 400, Statements: 1200}, {Commits: 1100, Statements: -1}}
	ws := workerSamples(before, after, []float64{1, 2}, []float64{1.5, 2.25}, 400, 250)
	require.Equal(t, []WorkerSample{
		{CommitsPerReq: 0.75, StmtsPerReq: 3, CPU: 2},
		{CommitsPerReq: 0.25, StmtsPerReq: -1, CPU: 1},
	}, ws)

	rep := &Report{Citus: 2, Rows: []Row{
		{Variant: "fresh-atomic-deferred (citus)", Workers: ws},
		{Variant: "replay-atomic-deferred (citus)", Workers: []WorkerSample{{CommitsPerReq: 0.01, StmtsPerReq: 0.02, CPU: 0.001}, {CommitsPerReq: 0.01, CPU: 0.001}}},
	}}
	var b strings.Builder
	rep.citusMarkdown(&b)
	md := b.String()
	require.Contains(t, md, "| fresh-atomic-deferred (citus) | 1 | 0.75 | 3.00 | 2.00 | 75 % | 500 |")
	require.Contains(t, md, "| fresh-atomic-deferred (citus) | 2 | 0.25 | – | 1.00 | 25 % | 1000 |")
	require.Contains(t, md, "| replay-atomic-deferred (citus) | 1 | 0.01 | 0.02 | 0.00 | 50 % | – |")
}
