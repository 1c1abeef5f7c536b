package completer_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

// The completer's runs against both stores are in storetest.RunPhaseFlow;
// these check its construction.
func TestNewRefusesAnInvalidConfig(t *testing.T) {
	t.Parallel()
	finder := memstore.New() // construction only asks its capabilities
	resume := func(context.Context, store.Unfinished) idem.Response { return idem.Response{} }
	leased, err := idem.New(finder, idem.Config{Mode: idem.ModeLeased})
	require.NoError(t, err)

	_, err = completer.New(leased, finder, resume, completer.Config{})
	require.NoError(t, err)
	atomic, err := leased.WithMode(idem.ModeAtomic)
	require.NoError(t, err)
	_, err = completer.New(atomic, finder, resume, completer.Config{})
	require.ErrorContains(t, err, "leased mode")
	_, err = completer.New(leased, nil, resume, completer.Config{})
	require.Error(t, err)
	_, err = completer.New(leased, noUnfinished{finder}, resume, completer.Config{})
	require.ErrorContains(t, err, "store.Capabilities.Unfinished")
	_, err = completer.New(leased, finder, nil, completer.Config{})
	require.Error(t, err)
	_, err = completer.New(leased, finder, resume, completer.Config{Interval: -1})
	require.ErrorContains(t, err, "Interval")
	_, err = completer.New(leased, finder, resume, completer.Config{BatchSize: -1})
	require.ErrorContains(t, err, "BatchSize")
}

// noUnfinished is memstore without its search for unfinished records.
type noUnfinished struct{ *memstore.Store }

func (s noUnfinished) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.Unfinished = false
	return c
}
