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
	"sync/atomic"
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
	{"1,024 connections sending 1 MB of header lines, never ending the block", headerFlood, nil, false},
	{"gRPC: 64 clients of one user, 4 CreateDeposit calls of 4 MB each at once", nil, grpcMessages(64, 4, 4_000_000), false},
	{"gRPC: 64 clients of one user, 4 CreateDeposit calls of 1 MiB − 64 bytes each at once", nil, grpcMessages(64, 4, 1<<20-64), false},
	{"gRPC: 256 clients of one user, one CreateDeposit call of 1 MiB − 64 bytes each at once", nil, grpcMessages(256, 1, 1<<20-64), false},
	{"gRPC: 1,200 calls with an unknown API key, each announcing 1 MiB and sending all but its last byte", nil, grpcStalls, false},
	{"gRPC: 200 calls with 2 MB of metadata each", nil, grpcMetadata, false},
	{"idem-gateway: 1,024 connections sending 1 MiB − 1 byte and stalling", stallsWithHonest, nil, true},
	{"idem-gateway: 1,024 connections sending 1 MB of header lines, never ending the block", headerFlood, nil, true},
}

// build is a paymentsd and an idem-gateway measured: this tree's, or the
// baseline's (Config.Baseline).
type build struct {
	paymentsd, gateway string
}

// measured is one load's figures on one build.
type measured struct {
	hwm    int64
	honest string
}

func (r *runner) memory(ctx context.Context) (*Report, error) {
	db, err := newDatabase(ctx, r.cfg.DatabaseURL, "idem_bench_mem", "", 64, 8)
	if err != nil {
		return nil, err
	}
	defer r.dispose(ctx, db)
	builds := []build{{r.cfg.Paymentsd, r.cfg.Gateway}}
	if r.cfg.Baseline != "" {
		builds = append(builds, build{r.cfg.Baseline, r.baseGateway})
	}
	var b strings.Builder
	b.WriteString("| load | peak resident memory (VmHWM), baseline | this build | target | honest deposit, baseline | this build |\n" +
		"| --- | ---: | ---: | ---: | --- | --- |\n")
	for _, l := range memoryLoads {
		if !strings.Contains(l.name, r.cfg.MemoryOnly) {
			continue
		}
		var got []measured
		for _, bd := range builds {
			r.cfg.Logf("memory: %s (%s)", l.name, filepath.Base(bd.paymentsd))
			m, err := r.memoryLoad(ctx, l, bd, db)
			if err != nil {
				return nil, err
			}
			got = append(got, m)
		}
		verdict := "met"
		if got[0].hwm >= memoryTarget {
			verdict = "missed"
		}
		base := measured{honest: "not measured"}
		baseHWM := "not measured"
		if len(got) > 1 {
			base, baseHWM = got[1], fmt.Sprintf("%d MiB", got[1].hwm>>20)
		}
		fmt.Fprintf(&b, "| %s | %s | %d MiB | < %d MiB (%s) | %s | %s |\n", l.name, baseHWM, got[0].hwm>>20, memoryTarget>>20, verdict, base.honest, got[0].honest)
	}
	r.cfg.Logf("memory:\n%s", b.String())
	return nil, os.WriteFile(filepath.Join(r.cfg.Out, "memory.md"), []byte(b.String()), 0o644)
}

// memoryLoad runs load l on a fresh paymentsd (and idem-gateway) of bd,
// and returns the measured process's peak memory and the honest deposit's
// answer.
func (r *runner) memoryLoad(ctx context.Context, l memoryLoad, bd build, db *database) (measured, error) {
	var extra []string
	if l.grpc != nil {
		addr, err := freeAddr()
		if err != nil {
			return measured{}, err
		}
		extra = []string{"--grpc-addr", addr}
	}
	s, err := r.startPaymentsdBin(ctx, bd.paymentsd, "paymentsd-memory", "atomic-deferred", db, extra...)
	if err != nil {
		return measured{}, err
	}
	defer s.stop()
	target := s
	if l.gateway {
		if target, err = r.startGatewayBin(ctx, bd.gateway, s, db); err != nil {
			return measured{}, err
		}
		defer target.stop()
	}
	var lerr error
	if l.grpc != nil {
		lerr = l.grpc(ctx, extra[1], db.users)
	} else {
		lerr = l.run(ctx, target.base, db.users)
	}
	if lerr == nil {
		lerr = honestDeposit(ctx, target.base, db.users[0])
	}
	m := measured{honest: "201"}
	if lerr != nil {
		m.honest = "failed: " + strings.ReplaceAll(lerr.Error(), "\n", "; ")
	}
	m.hwm, err = vmHWM(target.cmd.Process.Pid)
	return m, err
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

// honestAmounts gives each honest deposit of a run an amount of its own,
// so that the deposits' minute net never refuses one as a duplicate.
var honestAmounts atomic.Int64

// honestDeposit makes one small deposit, retrying while a bound answers
// 503 or 429, for at most 30 s.
func honestDeposit(ctx context.Context, base string, u user) error {
	amount := honestAmounts.Add(1)
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
	herr := honestDeposit(ctx, base, users[0])
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
