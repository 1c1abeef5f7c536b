package proctest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
)

// stopped is what a child says on stdout where it stops to be killed.
const stopped = "STOPPED"

// StopHere tells the parent that the child reached the point where it is
// to be killed, and waits for the SIGKILL; it exits if the parent closes
// the child's stdin first (the parent ended).
func StopHere() {
	fmt.Println(stopped)
	// A blocking read, not select {}: a child whose other goroutines all
	// wait would be stopped by the runtime's deadlock check.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(3)
}

// KillAtStop runs the test binary again, with env added to its
// environment (which its TestMain reads to play a child instead of running
// the tests), waits until the child calls StopHere and SIGKILLs it.
func KillAtStop(t *testing.T, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil { // held open until the kill
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != stopped+"\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child ended before it stopped: read %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
}
