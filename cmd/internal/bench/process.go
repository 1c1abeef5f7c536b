package bench

import (
	"github.com/idem-dev/idem/cmd/internal/freeport"

	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is a process the generator started.
type child struct {
	cmd  *exec.Cmd
	log  string     // its stderr, and its stdout unless startChild was given one
	done chan error // cmd.Wait's error, once it exited
}

// startChild starts argv, with env added to the environment and its output
// in dir/name.log (stdout, when not nil, gets its standard output). It is
// killed if the generator dies.
func startChild(name, dir string, argv, env []string, stdout io.Writer) (*child, error) {
	c := &child{log: filepath.Join(dir, name+".log"), done: make(chan error, 1)}
	lf, err := os.Create(c.log)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = lf, lf
	if stdout != nil {
		c.cmd.Stdout = stdout
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { c.done <- c.cmd.Wait(); lf.Close() }()
	return c, nil
}

// server is a child process serving HTTP on loopback.
type server struct {
	*child
	name   string
	base   string // http://127.0.0.1:PORT
	health string // the path that answers 200 once it serves; default /healthz
	// pprof is the address of its net/http/pprof, when it serves one.
	pprof string
	// trips reads its count of round trips to PostgreSQL; nil when it
	// keeps none.
	trips func(context.Context) (int64, error)
	grpc  string // paymentsd's gRPC address, when it serves one
	nats  string // a NATS server's client URL
}

// startServer starts argv (with env added) and waits for its /healthz.
// argv formats the listen address into the flags.
func startServer(ctx context.Context, name, dir string, procs int, env []string, argv func(addr string) []string) (*server, error) {
	return startServerAt(ctx, name, dir, procs, env, "/healthz", argv)
}

// startServerAt is startServer for a server whose health is told by GET
// health.
func startServerAt(ctx context.Context, name, dir string, procs int, env []string, health string, argv func(addr string) []string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c, err := startChild(name, dir, argv(addr), append([]string{"GOMAXPROCS=" + strconv.Itoa(procs)}, env...), nil)
	if err != nil {
		return nil, err
	}
	s := &server{child: c, name: name, base: "http://" + addr, health: health}
	if err := s.waitHealthy(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitHealthy waits for the server's health path to answer 200, for at
// most a minute.
func (s *server) waitHealthy(ctx context.Context) error {
	health := s.health
	if health == "" {
		health = "/healthz"
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("%s exited at start (%v): %s", s.name, err, tailFile(s.log, 10))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(s.base + health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become healthy in 60s: %s", s.name, tailFile(s.log, 10))
		}
	}
}

// cpuProfile saves a CPU profile of the server over the measured part of
// w into path.
func (s *server) cpuProfile(ctx context.Context, w window, path string) error {
	time.Sleep(time.Until(w.from))
	secs := max(int(w.to.Sub(w.from).Seconds()), 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.pprof, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile of %s: %w", s.name, err)
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// stop sends SIGTERM and, after 10 s, SIGKILL.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		s.done <- <-s.done
	}
}

// freeAddr is a free loopback address, host and port.
func freeAddr() (string, error) {
	port, err := freeport.Loopback()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), n)
}

// buildCommand builds the repository's ./cmd/name (no -race) into dir.
func buildCommand(ctx context.Context, dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	return out, goBuild(ctx, "", out, "./cmd/"+name)
}

// buildPaymentsd builds paymentsd (no -race) from the source tree at root
// (the repository's when empty) into dir.
func buildPaymentsd(ctx context.Context, dir, root string) (string, error) {
	out := filepath.Join(dir, "paymentsd")
	if root != "" {
		out += "-baseline"
	}
	return out, goBuild(ctx, root, out, "./cmd/paymentsd")
}

// goBuild runs go build -o out with args in the source tree at root (the
// repository's when empty), without cgo.
func goBuild(ctx context.Context, root, out string, args ...string) error {
	if root == "" {
		var err error
		if root, err = repoRoot(); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", strings.Join(args, " "), root, err, b)
	}
	return nil
}

// repoRoot is the repository's top directory, the one holding go.work,
// searched upward from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("bench: no go.work above the working directory; run from the repository")
		}
		dir = parent
	}
}
