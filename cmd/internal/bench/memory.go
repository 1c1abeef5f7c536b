package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The memory run (Config.Memory): paymentsd, started afresh for each load,
// under uploads that try to exhaust its memory; its peak resident memory
// (VmHWM) is the figure, and an honest deposit made after the load (and,
// for the gRPC and gateway loads, one made during it) must still be
// answered. The gateway load runs through idem-gateway in front of
// paymentsd, and the figure is the gateway's.

// memoryTarget is the most peak resident memory a load may cost.
const memoryTarget = 256 << 20

// memoryLoad is one row of the memory table: run against paymentsd's
// HTTP base URL (or, gateway set, idem-gateway's in front of it), or grpc
// against its gRPC address (memory_grpc.go).
type memoryLoad struct {
	name    string
	run     func(ctx context.Context, base string, users []user) error
	grpc    func(ctx context.Context, addr string, users []user) error
	gateway bool
}

var memoryLoads = []memoryLoad{
	{"32 clients posting 1 MiB bodies with fresh keys (8 each)", uploads, nil, false},
	{"1,024 connections sending 1 MiB − 1 byte and stalling", stalls, nil, false},
	{"5,000 idle keep-alive connections", idleConns, nil, false},
	{"gRPC: 64 clients of one user, 4 CreateDeposit calls of 4 MB each at once", nil, grpcMessages(4_000_000), false},
	{"gRPC: 64 clients of one user, 4 CreateDeposit calls of 1 MiB − 64 bytes each at once", nil, grpcMessages(1<<20 - 64), false},
	{"idem-gateway: 1,024 connections sending 1 MiB − 1 byte and stalling", stallsWithHonest, nil, true},
}

func (r *runner) memory(ctx context.Context) (*Report, error) {
	db, err := newDatabase(ctx, r.cfg.DatabaseURL, "idem_bench_mem", "", 64, 8)
	if err != nil {
		return nil, err
	}
	defer r.dispose(ctx, db)
	var b strings.Builder
	b.WriteString("| load | peak resident memory (VmHWM) | target | honest deposit |\n| --- | ---: | ---: | --- |\n")
	for i, l := range memoryLoads {
		if !strings.Contains(l.name, r.cfg.MemoryOnly) {
			continue
		}
		r.cfg.Logf("memory: %s", l.name)
		var extra []string
		if l.grpc != nil {
			addr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			extra = []string{"--grpc-addr", addr}
		}
		s, err := r.startPaymentsd(ctx, "paymentsd-memory", "atomic", db, extra...)
		if err != nil {
			return nil, err
		}
		measured := s
		if l.gateway {
			if measured, err = r.startGateway(ctx, s, db); err != nil {
				s.stop()
				return nil, err
			}
		}
		var lerr error
		if l.grpc != nil {
			lerr = l.grpc(ctx, extra[1], db.users)
		} else {
			lerr = l.run(ctx, measured.base, db.users)
		}
		honest := "201"
		if lerr == nil {
			lerr = honestDeposit(ctx, measured.base, db.users[0], int64(i+1))
		}
		if lerr != nil {
			honest = "failed: " + lerr.Error()
		}
		hwm, err := vmHWM(measured.cmd.Process.Pid)
		if measured != s {
			measured.stop()
		}
		s.stop()
		if err != nil {
			return nil, err
		}
		verdict := "met"
		if hwm >= memoryTarget {
			verdict = "missed"
		}
		fmt.Fprintf(&b, "| %s | %d MiB | < %d MiB (%s) | %s |\n", l.name, hwm>>20, memoryTarget>>20, verdict, honest)
	}
	r.cfg.Logf("memory:\n%s", b.String())
	return nil, os.WriteFile(filepath.Join(r.cfg.Out, "memory.md"), []byte(b.String()), 0o644)
}

// vmHWM reads a process's peak resident set size.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read VmHWM: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// honestDeposit makes one small deposit of amount (each load its own, for
// the deposits' minute net), retrying while a bound answers 503 or 429,
// for at most 30 s.
func honestDeposit(ctx context.Context, base string, u user, amount int64) error {
	key := fmt.Sprintf("honest-%d", time.Now().UnixNano())
	for deadline := time.Now().Add(30 * time.Second); ; {
		status, err := post(ctx, base, u, key, fmt.Appendf(nil, `{"currency":"USD","amount":%d}`, amount))
		switch {
		case err == nil && status == http.StatusCreated:
			return nil
		case err == nil && status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests:
			return fmt.Errorf("status %d", status)
		case time.Now().After(deadline):
			return fmt.Errorf("not answered 201 within 30s (last: %d %v)", status, err)
		}
		time.Sleep(time.Second) // the bounds answer Retry-After: 1
	}
}

func post(ctx context.Context, base string, u user, key string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/deposits", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+u.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// uploads: 32 clients, each posting 8 bodies just under 1 MiB with fresh
// keys (an unknown member makes each a stored 400, or a bound refuses it).
func uploads(ctx context.Context, base string, users []user) error {
	pad := strings.Repeat("x", 1<<20-64)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for c := range 32 {
		wg.Go(func() {
			for i := range 8 {
				body := fmt.Appendf(nil, `{"currency":"USD","amount":%d,"pad":"%s"}`, i+1, pad)
				if _, err := post(ctx, base, users[1+c%(len(users)-1)], fmt.Sprintf("upload-%d-%d", c, i), body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// stalls: 1,024 connections each declare a 1 MiB body, send all of it but
// the last byte, and stall until paymentsd answers them (408 at its body
// deadline, or at once 503 or 429 from a bound).
func stalls(ctx context.Context, base string, users []user) error {
	return stallConns(ctx, base, users, nil)
}

// stallsWithHonest is stalls with an honest deposit of users[0], who
// stalls nothing, made once every connection has sent its headers: it must
// be answered while the stalled bodies are held.
func stallsWithHonest(ctx context.Context, base string, users []user) error {
	var sent sync.WaitGroup
	sent.Add(1024)
	done := make(chan error, 1)
	go func() { done <- stallConns(ctx, base, users, &sent) }()
	sent.Wait()
	herr := honestDeposit(ctx, base, users[0], 1024)
	if herr != nil {
		herr = fmt.Errorf("honest deposit during the stalls: %w", herr)
	}
	return errors.Join(herr, <-done)
}

// stallConns runs the stalls; sent, when set, is Done once per connection
// dialled and its headers sent (or failed).
func stallConns(ctx context.Context, base string, users []user, sent *sync.WaitGroup) error {
	addr := strings.TrimPrefix(base, "http://")
	body := bytes.Repeat([]byte("x"), 1<<20-1)
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	for c := range 1024 {
		wg.Go(func() {
			headersSent := sync.OnceFunc(func() {
				if sent != nil {
					sent.Done()
				}
			})
			defer headersSent()
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			u := users[1+c%(len(users)-1)]
			_, _ = fmt.Fprintf(conn, "POST /v1/deposits HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: stall-%d\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, u.apiKey, c, 1<<20)
			headersSent()
			go func() {
				_, _ = conn.Write(body) // blocks while the server does not read; ends when the connection closes
			}()
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				errs <- fmt.Errorf("stalled connection %d: %w", c, err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// idleConns: 5,000 connections each make one request and stay open, idle,
// while the honest deposit is made.
func idleConns(ctx context.Context, base string, _ []user) error {
	addr := strings.TrimPrefix(base, "http://")
	conns := make([]net.Conn, 0, 5000)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 5000 {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conns = append(conns, conn)
		if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}
