//go:build !race

package proctest

// Race: the tests run without the race detector.
const Race = false
