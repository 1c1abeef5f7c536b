package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// listening matches a replica's start line on stderr: paymentsd's
// "time=… level=INFO msg=listening url=http://127.0.0.1:41234 store=postgres mode=atomic",
// or idem-gateway's "listening on http://127.0.0.1:41234 (upstream …)".
var listening = regexp.MustCompile(`(?:msg=listening url=|listening on )(http://[^\s]+)`)

// Replica is one slot of the paymentsd fleet: a process that is killed and
// started again, on a new port each time.
type Replica struct {
	Slot int
	bin  string
	args []string
	log  string // file the processes' stderr is appended to
	// ready matches the line that says the process serves, its address
	// the first group; nil: listening.
	ready *regexp.Regexp

	mu   sync.Mutex    // guards cmd, url, done
	cmd  *exec.Cmd     // nil once killed
	url  string        // the last address it listened on
	done chan struct{} // closed when cmd has exited
}

// NewReplica prepares slot's replica; Start runs it.
func NewReplica(slot int, bin, logDir string, args []string) *Replica {
	return &Replica{Slot: slot, bin: bin, args: args, log: filepath.Join(logDir, fmt.Sprintf("replica%d.log", slot))}
}

// URL is the replica's base URL: its last one while it is down, the way a
// load balancer's view lags behind a crash. "" before its first start.
func (r *Replica) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.url
}

// Start runs the replica and waits for its listening line. Starting can
// fail while PostgreSQL is unreachable; the caller retries.
func (r *Replica) Start(ctx context.Context) error {
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, r.args...)
	// The replica dies with the harness, whatever kills the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start replica %d: %w", r.Slot, err)
	}
	fmt.Fprintf(logf, "--- chaos: started pid %d at %s\n", cmd.Process.Pid, time.Now().Format(time.RFC3339Nano))
	ready := r.ready
	if ready == nil {
		ready = listening
	}
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		// Copy stderr to the log for as long as the process lives, and
		// report the first listening line.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := ready.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(logf, stderr)
		_ = cmd.Wait()
		fmt.Fprintf(logf, "--- chaos: pid %d exited: %v\n", cmd.Process.Pid, cmd.ProcessState)
		logf.Close()
		close(done)
	}()
	select {
	case u := <-found:
		r.mu.Lock()
		r.cmd, r.url, r.done = cmd, u, done
		r.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("replica %d exited before listening (see %s)", r.Slot, r.log)
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("replica %d did not print its listening line (see %s)", r.Slot, r.log)
}

// StartRetrying starts the replica, retrying for up to d: a replica that
// starts while its database link is cut may exit at once.
func (r *Replica) StartRetrying(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := r.Start(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL and waits for the process to be gone. It reports
// whether there was a process to kill.
func (r *Replica) Kill() bool {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd, r.done = nil, nil
	r.mu.Unlock()
	if cmd == nil {
		return false
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	return true
}

// Started reports whether the replica was started and not killed since;
// it may have exited on its own.
func (r *Replica) Started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// Signal sends sig to the running process, if any.
func (r *Replica) Signal(sig syscall.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil && r.cmd.Process.Signal(sig) == nil
}

// Alive reports whether the replica's process is running.
func (r *Replica) Alive() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// LogTail is the end of the replica's log.
func (r *Replica) LogTail(n int) string {
	b, _ := os.ReadFile(r.log)
	return tail(b, n)
}
