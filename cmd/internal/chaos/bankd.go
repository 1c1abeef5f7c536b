package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/idem-dev/idem/cmd/internal/bank"
)

// Bankd is the simulated bank process (cmd/bankd, docs/bankd.md) the
// replicas pay through. It is killed and started again on the same port
// and the same SQLite file, so the replicas' --bank-url stays valid and
// every transfer it acknowledged survives.
type Bankd struct {
	bin, db, addr, log string
	slowDelay          time.Duration
	proc               *Replica // the running process; the bank goroutine alone swaps it
	starts             uint64
	seed               uint64
}

// NewBankd prepares a bank with its database and log in dir, on a free
// loopback port; Start runs it.
func NewBankd(bin, dir string, slowDelay time.Duration, seed uint64) (*Bankd, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, err
	}
	return &Bankd{bin: bin, db: filepath.Join(dir, "bankd.db"), addr: addr, log: filepath.Join(dir, "bankd.log"),
		slowDelay: slowDelay, seed: seed}, nil
}

// URL is the bank's base URL, the same across restarts.
func (b *Bankd) URL() string { return "http://" + b.addr }

// Start runs bankd with faults (a --faults spec; "" for none), each start
// with a seed of its own. The port can be briefly unavailable after a
// kill: it retries.
func (b *Bankd) Start(ctx context.Context, faults string) error {
	b.starts++
	args := []string{"--addr", b.addr, "--db", b.db, "--slow-delay", b.slowDelay.String(),
		"--seed", strconv.FormatUint(b.seed+b.starts, 10)}
	if faults != "" {
		args = append(args, "--faults", faults)
	}
	b.proc = &Replica{Slot: -1, bin: b.bin, args: args, log: b.log}
	if err := b.proc.StartRetrying(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("bankd: %w\n%s", err, b.proc.LogTail(10))
	}
	return nil
}

// Kill SIGKILLs the bank, if it runs.
func (b *Bankd) Kill() bool { return b.proc != nil && b.proc.Kill() }

// FaultsInjected counts the faults the bank's processes logged.
func (b *Bankd) FaultsInjected() int {
	log, _ := os.ReadFile(b.log)
	return bytes.Count(log, []byte(`msg="fault injected"`))
}

// Transfers lists every transfer the bank recorded (GET /v1/transfers,
// never faulted).
func (b *Bankd) Transfers(ctx context.Context) ([]bank.Transfer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return bank.List(ctx, b.URL())
}
