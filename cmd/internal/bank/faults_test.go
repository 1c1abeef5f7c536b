package bank

import (
	"math"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

func TestParseFaultsReadsItsOwnString(t *testing.T) {
	t.Parallel()
	spec := "error-before=0.05,error-after=0.05,slow-after=0.05,reset-after=0.05,hang=0.01"
	fs, err := ParseFaults(spec)
	require.NoError(t, err)
	require.Equal(t, spec, fs.String())
	none, err := ParseFaults(" ")
	require.NoError(t, err)
	require.Equal(t, Faults{}, none)
	require.Equal(t, NoFault, NewDice(none, 1).Roll())
}

// The draws follow the probabilities.
func TestDiceFollowsTheProbabilities(t *testing.T) {
	t.Parallel()
	fs, err := ParseFaults("error-before=0.1,error-after=0.2,slow-after=0.05,reset-after=0.15,hang=0.3")
	require.NoError(t, err)
	d := NewDice(fs, 7)
	const n = 100_000
	var counts [len(faultNames)]int
	for range n {
		counts[d.Roll()]++
	}
	want := fs
	want[NoFault] = 0.2
	for f, c := range counts {
		// Five standard deviations of a binomial count.
		sd := math.Sqrt(n * want[f] * (1 - want[f]))
		require.InDelta(t, want[f]*n, float64(c), 5*sd+1, "%s", Fault(f))
	}
}
