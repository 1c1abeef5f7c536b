package chaos

import (
	"github.com/idem-dev/idem/cmd/internal/freeport"

	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Database is the PostgreSQL a run uses: a [Cluster] of the harness's own,
// or a pg_auto_failover [Formation].
type Database interface {
	// DSN connects to database db, for the harness and for replicas
	// without a fault proxy.
	DSN(db string) string
	// ProxyTarget is the address the replicas' fault proxies forward to;
	// "" when the primary moves and there is none.
	ProxyTarget() string
	// Prepare sets up database db once it is created.
	Prepare(ctx context.Context, db string) error
	// Disrupt is the database's fault while traffic flows: a restart, a
	// SIGKILL of the primary, a Citus worker restarted or a shard moved.
	Disrupt(ctx context.Context) (Disruption, error)
	// MigrateFlags are added to the migrate commands of paymentsd and
	// idem-gateway (Citus: --citus).
	MigrateFlags() []string
	Describe() string
	Close()
}

// Disruption is one fault of the database.
type Disruption struct {
	// What names it when the database has faults of several kinds; ""
	// for a cluster's restart and a formation's primary kill.
	What string
	// Detail says more of it, for the log.
	Detail string
	// At is when it began, from the start of the faults.
	At time.Duration
	// Took is the time from the fault until the database accepted writes
	// again (a shard move: the move's own time).
	Took time.Duration
}

// Cluster is a throwaway PostgreSQL cluster of the harness's own: it must be
// restarted mid-run, so it is never the system's server. It lives in a temp
// dir, listens on 127.0.0.1 only, and runs as the postgres system user when
// the harness runs as root (PostgreSQL refuses root), like
// scripts/test-postgres.sh.
type Cluster struct {
	serverDir
	bindir string
	data   string
	port   int
	opts   string
}

// serverDir is a temp dir a PostgreSQL server runs in, as the postgres
// system user when the harness runs as root (PostgreSQL refuses root).
type serverDir struct {
	dir   string   // the temp dir; owned by runAs when set
	runAs string   // system user to run the server as; "" runs as ourselves
	env   []string // added to the environment of every command
}

// newServerDir creates the temp dir, in /tmp rather than $TMPDIR: the
// server user must reach it.
func newServerDir(prefix string) (serverDir, error) {
	var d serverDir
	if os.Geteuid() == 0 {
		d.runAs = "postgres"
		if _, err := user.Lookup(d.runAs); err != nil {
			d.runAs = "nobody"
		}
	}
	var err error
	if d.dir, err = os.MkdirTemp("/tmp", prefix); err != nil {
		return d, err
	}
	if d.runAs != "" {
		u, err := user.Lookup(d.runAs)
		if err != nil {
			d.Remove()
			return d, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(d.dir, uid, gid); err != nil {
			d.Remove()
			return d, err
		}
	}
	return d, nil
}

// StartCluster creates and starts a cluster.
func StartCluster(ctx context.Context) (*Cluster, error) {
	return startCluster(ctx, "idem-chaos-pg-", "")
}

// startCluster creates and starts a cluster in a temp dir named prefix…,
// with the server settings opts added to the harness's.
func startCluster(ctx context.Context, prefix, opts string) (*Cluster, error) {
	bindir, err := findBindir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bindir: bindir}
	if c.serverDir, err = newServerDir(prefix); err != nil {
		return nil, err
	}
	c.data = filepath.Join(c.dir, "data")
	sock := filepath.Join(c.dir, "sock")
	if out, err := c.pg(ctx, "mkdir", "-m", "700", sock); err != nil {
		c.Remove()
		return nil, fmt.Errorf("mkdir %s: %v: %s", sock, err, out)
	}
	// --locale=C: deterministic, and no failure on an uninstalled LANG.
	if out, err := c.pg(ctx, filepath.Join(bindir, "initdb"), "-D", c.data, "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		c.Remove()
		return nil, fmt.Errorf("initdb (%s): %v\n%s", bindir, err, tail(out, 30))
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind: try a few.
	for range 5 {
		if c.port, err = freeport.Loopback(); err != nil {
			break
		}
		c.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off "+
			"-c max_connections=400 -c shared_buffers=128MB %s", c.port, sock, opts)
		if err = c.ctl(ctx, "start"); err == nil {
			return c, nil
		}
	}
	c.Stop()
	c.Remove()
	return nil, fmt.Errorf("start PostgreSQL: %w", err)
}

// Addr is the server's host:port.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }

// pgURL returns the connection string of database db at addr: a server,
// a fault proxy in front of one, or several hosts.
func pgURL(addr, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db)
}

// DSN connects to database db directly.
func (c *Cluster) DSN(db string) string { return pgURL(c.Addr(), db) }

// ProxyTarget is the server's address: the fault proxies forward to it.
func (c *Cluster) ProxyTarget() string { return c.Addr() }

// Describe names the server.
func (c *Cluster) Describe() string { return fmt.Sprintf("PostgreSQL at %s (%s)", c.Addr(), c.bindir) }

// Prepare has nothing to do on a cluster of one server.
func (c *Cluster) Prepare(context.Context, string) error { return nil }

// Restart is a fast restart: active transactions are rolled back and every
// connection is closed, as when the database fails over or is upgraded.
func (c *Cluster) Restart(ctx context.Context) error { return c.ctl(ctx, "restart", "-m", "fast") }

// Disrupt restarts the server and returns how long the restart took.
func (c *Cluster) Disrupt(ctx context.Context) (Disruption, error) {
	start := time.Now()
	err := c.Restart(ctx)
	return Disruption{Took: time.Since(start)}, err
}

// MigrateFlags: none on one server.
func (c *Cluster) MigrateFlags() []string { return nil }

// Close stops the server and removes its files.
func (c *Cluster) Close() {
	c.Stop()
	c.Remove()
}

// Stop stops the server at once; the cluster is thrown away after.
func (c *Cluster) Stop() {
	if c.data == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = c.pg(ctx, filepath.Join(c.bindir, "pg_ctl"), "stop", "-D", c.data, "-m", "immediate", "-w", "-t", "20")
}

// Remove deletes the server's files; stop it first.
func (d serverDir) Remove() {
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
}

// LogTail returns the end of the server log, for a failure message.
func (c *Cluster) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	return tail(b, n)
}

func (c *Cluster) ctl(ctx context.Context, action string, extra ...string) error {
	args := append([]string{action, "-D", c.data, "-w", "-t", "60", "-l", filepath.Join(c.dir, "postgres.log"),
		"-o", c.opts}, extra...)
	out, err := c.pg(ctx, filepath.Join(c.bindir, "pg_ctl"), args...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s\nserver log:\n%s", action, err, tail(out, 10), c.LogTail(20))
	}
	return nil
}

// pg runs a command as the server user, from inside the temp dir so that an
// unreadable working directory (a checkout under /root) does not matter.
func (d serverDir) pg(ctx context.Context, name string, args ...string) ([]byte, error) {
	return d.command(ctx, name, args...).CombinedOutput()
}

// command is a command that runs as the server user.
func (d serverDir) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if d.runAs != "" {
		args = append([]string{"-u", d.runAs, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = d.dir
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), d.env...)
	return cmd
}

// findBindir finds initdb and pg_ctl: PG_BINDIR, else PATH, else the
// highest version under /usr/lib/postgresql.
func findBindir() (string, error) {
	ok := func(d string) bool {
		for _, f := range []string{"initdb", "pg_ctl"} {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if ok(d) {
			return d, nil
		}
		return "", fmt.Errorf("PG_BINDIR=%s holds no initdb and pg_ctl", d)
	}
	if p, err := exec.LookPath("initdb"); err == nil && ok(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if ok(d) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) in PG_BINDIR, PATH or /usr/lib/postgresql/*/bin; " +
		"install PostgreSQL (Debian/Ubuntu: apt-get install postgresql)")
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
