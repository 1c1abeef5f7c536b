// Package proctest serves the tests that drive this repository's commands
// as real processes: it builds the command under test once per test binary
// and collects what the processes write; and it SIGKILLs a test binary run
// again as a child at the point the child names (KillAtStop).
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Run builds the command in the current directory (the package under test)
// into a temporary directory, with the race detector when the tests run
// with it, sets *bin to the binary's path, runs the tests and removes the
// binary. It is a TestMain's body:
//
//	func TestMain(m *testing.M) { os.Exit(proctest.Run(m, "bankd", &binary)) }
func Run(m *testing.M, name string, bin *string) int {
	dir, err := os.MkdirTemp("", name+"-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, name)
	args := []string{"build", "-o", *bin}
	if Race {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
		return 1
	}
	return m.Run()
}

// Buffer is a bytes.Buffer that a process writes while a test reads it.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
