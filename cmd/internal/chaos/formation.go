package chaos

import (
	"github.com/idem-dev/idem/cmd/internal/freeport"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// FailoverConfig sizes a pg_auto_failover formation.
type FailoverConfig struct {
	// Nodes is the number of data nodes: a primary and Nodes-1 standbys
	// (at least 2).
	Nodes int
	// Async makes commits not wait for a standby (synchronous_commit =
	// local on the run's databases): the contrast in which a failover can
	// lose acknowledged commits.
	Async bool
	// LogDir receives the pg_autoctl logs, one per node; "" keeps them
	// in the formation's temp dir, removed on Close.
	LogDir string
}

// The formation's settings: a SIGKILLed primary is replaced in under 10 s
// (docs/operations.md, "Failover"). The monitor's are in milliseconds, the
// keeper's in seconds. network_partition_timeout stays below
// primary_demote_timeout: an isolated primary demotes itself before the
// monitor promotes a standby, or two primaries would take writes.
var (
	monitorSettings = map[string]string{
		"pgautofailover.health_check_period":               "1000",
		"pgautofailover.health_check_timeout":              "2000",
		"pgautofailover.health_check_max_retries":          "1",
		"pgautofailover.health_check_retry_delay":          "500",
		"pgautofailover.node_considered_unhealthy_timeout": "2000",
		"pgautofailover.primary_demote_timeout":            "4000",
	}
	keeperSettings = [][2]string{
		{"timeout.network_partition_timeout", "3"},
		{"timeout.prepare_promotion_catchup", "5"},
		{"timeout.prepare_promotion_walreceiver", "1"},
	}
)

// Formation is a pg_auto_failover formation on loopback: a monitor and
// data nodes, a primary and its standbys, run by pg_autoctl as the server
// user. Its fault is a SIGKILL of the primary's whole node (keeper and
// postmaster), so the monitor promotes a standby; the killed node is then
// started again and rejoins as a standby.
type Formation struct {
	serverDir
	cfg     FailoverConfig
	pgctl   string
	autoctl string
	monitor *formationNode
	nodes   []*formationNode
}

type formationNode struct {
	name string
	data string
	port int
	cmd  *exec.Cmd // the running pg_autoctl; nil when stopped
	done chan struct{}
}

// StartFormation creates the monitor and the data nodes, one after the
// other, and returns when every standby is a synchronous secondary.
func StartFormation(ctx context.Context, cfg FailoverConfig) (*Formation, error) {
	if cfg.Nodes < 2 {
		return nil, errors.New("a formation needs at least 2 data nodes")
	}
	bindir, err := formationBindir()
	if err != nil {
		return nil, err
	}
	autoctl, err := exec.LookPath("pg_autoctl")
	if err != nil {
		return nil, errors.New("no pg_autoctl on PATH (Debian: apt-get install postgresql-15-auto-failover pg-auto-failover-cli)")
	}
	f := &Formation{cfg: cfg, pgctl: filepath.Join(bindir, "pg_ctl"), autoctl: autoctl}
	if f.serverDir, err = newServerDir("idem-failover-"); err != nil {
		return nil, err
	}
	// pg_autoctl keeps its state under XDG_CONFIG_HOME and XDG_DATA_HOME.
	f.env = []string{"XDG_CONFIG_HOME=" + filepath.Join(f.dir, "config"), "XDG_DATA_HOME=" + filepath.Join(f.dir, "share")}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	if f.monitor, err = f.newNode("monitor"); err != nil {
		return nil, err
	}
	if err := f.start(f.monitor, "create", "monitor", "--pgdata", f.monitor.data, "--pgport", strconv.Itoa(f.monitor.port),
		"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", f.pgctl, "--run"); err != nil {
		return nil, err
	}
	if err := f.settle(ctx, f.monitor, 2*time.Minute, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, f.monitorURL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for k, v := range monitorSettings {
			if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", k, v)); err != nil {
				return err
			}
		}
		_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
		return err
	}); err != nil {
		return nil, fmt.Errorf("monitor: %w\n%s", err, f.logTail(f.monitor, 20))
	}
	monitor := fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", f.monitor.port)
	// The first node becomes the primary; the standbys then join together.
	for i := range cfg.Nodes {
		n, err := f.newNode(fmt.Sprintf("node%d", i+1))
		if err != nil {
			return nil, err
		}
		f.nodes = append(f.nodes, n)
		if err := f.start(n, "create", "postgres", "--pgdata", n.data, "--pgport", strconv.Itoa(n.port),
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", f.pgctl,
			"--monitor", monitor, "--name", n.name, "--run"); err != nil {
			return nil, err
		}
		if i > 0 && i < cfg.Nodes-1 {
			continue
		}
		if err := f.settle(ctx, n, 3*time.Minute, f.converged(i+1)); err != nil {
			return nil, fmt.Errorf("%s did not join: %w\n%s", n.name, err, f.logTail(n, 20))
		}
	}
	for _, n := range f.nodes {
		for _, s := range keeperSettings {
			// The running keeper rewrites its configuration file as it
			// changes state, and a config set that reads it meanwhile
			// finds it incomplete: try again until the file parses.
			if err := f.settle(ctx, n, time.Minute, func(ctx context.Context) error {
				if out, err := f.pg(ctx, f.autoctl, "config", "set", "--pgdata", n.data, s[0], s[1]); err != nil {
					return fmt.Errorf("pg_autoctl config set %s: %v: %s", s[0], err, out)
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
		// The keeper reads its configuration again on SIGHUP.
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGHUP)
	}
	ok = true
	return f, nil
}

// formationBindir is PG_BINDIR, else the newest /usr/lib/postgresql/N/bin
// whose version has the pgautofailover extension installed.
func formationBindir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		ext := filepath.Join("/usr/share/postgresql", strconv.Itoa(pgMajor(d)), "extension", "pgautofailover.control")
		if _, err := os.Stat(ext); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no /usr/lib/postgresql/N/bin with the pgautofailover extension (Debian: apt-get install postgresql-15-auto-failover)")
}

func (f *Formation) newNode(name string) (*formationNode, error) {
	port, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	return &formationNode{name: name, data: filepath.Join(f.dir, name), port: port}, nil
}

// start runs pg_autoctl for n in a process group of its own, so that a
// kill reaches the keeper, its services and the postmaster at once.
func (f *Formation) start(n *formationNode, args ...string) error {
	logf, err := os.OpenFile(f.logPath(n), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := f.command(context.Background(), f.autoctl, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pg_autoctl %s: %w", strings.Join(args[:2], " "), err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(n.done)
	}()
	return nil
}

// kill SIGKILLs n's process group and its postmaster, and waits for
// pg_autoctl to be gone.
func (f *Formation) kill(n *formationNode) {
	if n.cmd == nil {
		return
	}
	if b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

func (f *Formation) logTail(n *formationNode, lines int) string {
	b, _ := os.ReadFile(f.logPath(n))
	return tail(b, lines)
}

func (f *Formation) logPath(n *formationNode) string {
	dir := f.cfg.LogDir
	if dir == "" {
		dir = f.dir
	}
	return filepath.Join(dir, "pg_autoctl-"+n.name+".log")
}

func (f *Formation) monitorURL() string {
	return pgURL("127.0.0.1:"+strconv.Itoa(f.monitor.port), "pg_auto_failover")
}

// settle calls try until it succeeds or d passes, or until n's pg_autoctl
// exits (n nil: no such check).
func (f *Formation) settle(ctx context.Context, n *formationNode, d time.Duration, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		err := try(actx)
		acancel()
		if err == nil {
			return nil
		}
		var exited <-chan struct{}
		if n != nil {
			exited = n.done
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", d, err)
		case <-exited:
			return fmt.Errorf("pg_autoctl of %s exited: %w", n.name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// converged reports, as an error, a formation whose n nodes are not one
// primary and secondaries, every node in the state the monitor assigned.
func (f *Formation) converged(n int) func(context.Context) error {
	return func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, f.monitorURL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid")
		if err != nil {
			return err
		}
		var states []string
		primaries, secondaries := 0, 0
		for rows.Next() {
			var name, reported, goal string
			if err := rows.Scan(&name, &reported, &goal); err != nil {
				return err
			}
			states = append(states, name+": "+reported+" → "+goal)
			switch {
			case reported != goal:
			case reported == "primary" || (n == 1 && reported == "single"):
				primaries++
			case reported == "secondary":
				secondaries++
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if primaries != 1 || primaries+secondaries != n {
			return fmt.Errorf("states: %s", strings.Join(states, ", "))
		}
		return nil
	}
}

// DSN connects to database db on whichever node is the primary.
func (f *Formation) DSN(db string) string {
	hosts := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(n.port)
	}
	return pgURL(strings.Join(hosts, ","), db) + "&target_session_attrs=read-write&connect_timeout=2"
}

// ProxyTarget is empty: the primary moves, so no fault proxy can sit in
// front of it.
func (f *Formation) ProxyTarget() string { return "" }

// MigrateFlags: none on a formation, which is one PostgreSQL at a time.
func (f *Formation) MigrateFlags() []string { return nil }

// Describe names the formation.
func (f *Formation) Describe() string {
	mode := "synchronous"
	if f.cfg.Async {
		mode = "asynchronous"
	}
	return fmt.Sprintf("pg_auto_failover formation, monitor and %d data nodes, %s replication (%s)", len(f.nodes), mode, f.dir)
}

// Prepare makes the commits in db not wait for a standby in the
// asynchronous contrast.
func (f *Formation) Prepare(ctx context.Context, db string) error {
	if !f.cfg.Async {
		return nil
	}
	conn, err := pgx.Connect(ctx, f.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "ALTER DATABASE "+db+" SET synchronous_commit = local")
	return err
}

// Disrupt SIGKILLs the primary's node, measures the time until a write
// through the multi-host URL is accepted, then starts the killed node again
// and waits until it is a secondary, so that the next kill leaves a copy.
func (f *Formation) Disrupt(ctx context.Context) (Disruption, error) {
	primary, err := f.primary(ctx)
	if err != nil {
		return Disruption{}, err
	}
	killed := time.Now()
	f.kill(primary)
	if err := f.settle(ctx, nil, 2*time.Minute, f.probeWrite); err != nil {
		return Disruption{}, fmt.Errorf("no write accepted after %s was killed: %w", primary.name, err)
	}
	outage := Disruption{Took: time.Since(killed)}
	if err := f.start(primary, "run", "--pgdata", primary.data); err != nil {
		return outage, err
	}
	if err := f.settle(ctx, primary, 3*time.Minute, f.converged(len(f.nodes))); err != nil {
		return outage, fmt.Errorf("%s did not rejoin: %w\n%s", primary.name, err, f.logTail(primary, 20))
	}
	return outage, nil
}

func (f *Formation) primary(ctx context.Context) (*formationNode, error) {
	conn, err := pgx.Connect(ctx, f.monitorURL())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var name string
	if err := conn.QueryRow(ctx, "SELECT nodename FROM pgautofailover.node WHERE reportedstate = 'primary'").Scan(&name); err != nil {
		return nil, fmt.Errorf("the monitor names no primary: %w", err)
	}
	for _, n := range f.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the monitor names an unknown primary %q", name)
}

// probeWrite commits one row through the multi-host URL, a new connection
// each time, as a replica reconnecting would.
func (f *Formation) probeWrite(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, f.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS failover_probe (at timestamptz NOT NULL DEFAULT now()); INSERT INTO failover_probe DEFAULT VALUES")
	return err
}

// Close kills every node and removes the formation's files.
func (f *Formation) Close() {
	for _, n := range append([]*formationNode{f.monitor}, f.nodes...) {
		if n != nil {
			f.kill(n)
		}
	}
	f.Remove()
}
