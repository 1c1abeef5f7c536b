package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// sweepProcess is `paymentsd keys sweep` as an operator runs it (default
// batch size and pause), a child process that the run stops (SIGSTOP) and
// resumes (SIGCONT) to alternate windows with and without the sweep.
type sweepProcess struct {
	*child
	out bytes.Buffer // stdout: {"deleted":N}
}

// startSweep starts bin keys sweep on db, logging into dir.
func startSweep(bin string, db *database, dir string) (*sweepProcess, error) {
	p := &sweepProcess{}
	c, err := startChild("paymentsd-keys-sweep", dir, []string{bin, "keys", "sweep", "--db", db.url}, nil, &p.out)
	if err != nil {
		return nil, err
	}
	p.child = c
	return p, nil
}

// signal sends sig unless the process has exited already.
func (p *sweepProcess) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("paymentsd keys sweep: %v: %w", sig, err)
	}
	return nil
}

// kill ends the process if it still runs (stopped or not) and waits for it.
func (p *sweepProcess) kill() {
	_ = p.cmd.Process.Kill()
	p.done <- <-p.done
}

// deleted is the count the process printed, given cmd.Wait's error: an
// error if it failed.
func (p *sweepProcess) deleted(waitErr error) (int, error) {
	if waitErr != nil {
		return 0, fmt.Errorf("paymentsd keys sweep: %w: %s", waitErr, tailFile(p.log, 10))
	}
	var res struct {
		Deleted *int `json:"deleted"`
	}
	if err := json.Unmarshal(p.out.Bytes(), &res); err != nil || res.Deleted == nil {
		return 0, fmt.Errorf("paymentsd keys sweep printed %q, not {\"deleted\":N}", p.out.String())
	}
	return *res.Deleted, nil
}
