package proctest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// stopped is what a child says on stdout where it stops to be killed.
const stopped = "STOPPED"

// StopHere tells the parent that the child reached the point where it is
// to be killed, and waits for the SIGKILL.
func StopHere() {
	fmt.Println(stopped)
	select {}
}

// KillAtStop runs the test binary again, with env added to its
// environment (which its TestMain reads to play a child instead of running
// the tests), waits until the child calls StopHere and SIGKILLs it.
func KillAtStop(t *testing.T, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
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
