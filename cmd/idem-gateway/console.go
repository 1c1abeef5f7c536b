package main

import (
	"context"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/console"
	"github.com/idem-dev/idem/store"
)

// newConsole returns the operator console when --console-token-file is
// set, else nil: it shows the keys whose upstream outcome is unknown and
// resolves them as keys resolve does, audited. It is served on the admin
// listener (--metrics-addr) only.
func newConsole(f serveFlags, s store.Store, g *gateway) (*console.Console, error) {
	if f.consoleToken == "" {
		return nil, nil
	}
	c, err := console.New(console.Config{
		Name: "idem-gateway", Store: s, TokenFile: f.consoleToken, OutcomeUnknownFunc: outcomeUnknown,
		ReplayCacheFunc: g.replayCache, Logger: g.logger, DetailFunc: g.upstreamDetail,
		RunbookURL: runbookURL, NoRecoveryPoints: true,
	})
	if err != nil {
		return nil, cli.Usagef("--console-token-file: %v", err)
	}
	return c, nil
}

// runbookURL is the runbook for unknown outcomes, which the console links.
const runbookURL = "https://github.com/idem-dev/idem/blob/main/docs/operations.md#runbook-unknown-outcomes"

// upstreamDetail is the console's view of a key upstream: the key the
// gateway forwarded, the upstream that serves its path, and, for an
// unknown outcome, why it is unknown.
func (g *gateway) upstreamDetail(_ context.Context, rec *store.Record) ([]console.Section, error) {
	d := detailOf(rec, g.upstreams)
	if d.Upstream == "" {
		d.Upstream = "none serves its path now"
	}
	fields := []console.Field{{Name: "Forwarded key", Value: d.ForwardedKey}, {Name: "Upstream", Value: d.Upstream}}
	if outcomeUnknown(rec) {
		why := causeText[d.Cause]
		if why == "" {
			why = "not recorded (stored before causes were)"
		}
		fields = append(fields, console.Field{Name: "Why unknown", Value: why})
	}
	return []console.Section{{Title: "Upstream", Fields: fields}}, nil
}

// replayCache adds up the guarded routes' replay caches, for the console.
func (g *gateway) replayCache() idem.ReplayCacheStats {
	var sum idem.ReplayCacheStats
	for _, rt := range g.routes {
		if rt.mw == nil {
			continue
		}
		c := rt.mw.ReplayCache()
		sum.Entries += c.Entries
		sum.Bytes += c.Bytes
		sum.Max += c.Max
	}
	return sum
}
