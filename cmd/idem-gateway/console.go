package main

import (
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
		ReplayCacheFunc: g.replayCache, Logger: g.logger,
	})
	if err != nil {
		return nil, cli.Usagef("--console-token-file: %v", err)
	}
	return c, nil
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
