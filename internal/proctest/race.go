//go:build race

package proctest

// Race: the tests run with the race detector, so the command is built with
// it too.
const Race = true
