package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux the benchmark runs on.
const clockTicks = 100

// cpuMeter reads the CPU time spent by the parties of a segment: the
// server process, the PostgreSQL cluster (the postmaster and all its
// children), the generator, and the peer the server works with (bankd,
// the NATS server), if any. Each is 0 where it cannot be read (not Linux,
// or a server on another host).
type cpuMeter struct {
	postmaster int
}

// cpuTimes are CPU seconds.
type cpuTimes struct {
	Server, Postgres, Generator float64
	Peer                        float64 `json:",omitempty"`
}

func newCPUMeter(ctx context.Context, pool *pgxpool.Pool) *cpuMeter {
	m := &cpuMeter{}
	var dir string
	if err := pool.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dir); err != nil {
		return m
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return m
	}
	m.postmaster, _ = strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	return m
}

func (m *cpuMeter) read(serverPID, peerPID int) cpuTimes {
	var t cpuTimes
	if serverPID > 0 {
		t.Server, _ = procCPU(serverPID)
	}
	if peerPID > 0 {
		t.Peer, _ = procCPU(peerPID)
	}
	if m.postmaster > 0 {
		t.Postgres = m.clusterCPU()
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		t.Generator = tv(ru.Utime) + tv(ru.Stime)
	}
	return t
}

// clusterCPU returns the CPU seconds of the postmaster, its live children
// and the children it has reaped. A child reaped while /proc is walked
// would be missed (gone from /proc, not yet in the reaped sum read before)
// or counted twice (read live, then in the reaped sum read after), and
// the cluster's CPU would seem to drop between two reads; so the walk is
// repeated until no child was reaped during it.
func (m *cpuMeter) clusterCPU() float64 {
	var sum float64
	for range 10 {
		before := reapedCPU(m.postmaster)
		sum = 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if cpu, ppid := procCPU(pid); pid == m.postmaster || ppid == m.postmaster {
				sum += cpu
			}
		}
		after := reapedCPU(m.postmaster)
		sum += after
		if after == before {
			break
		}
	}
	return sum
}

func tv(t syscall.Timeval) float64 {
	return float64(t.Sec) + float64(t.Usec)/float64(time.Second/time.Microsecond)
}

// procCPU returns a process's CPU seconds (user and system) and its parent.
func procCPU(pid int) (cpu float64, ppid int) {
	f := statFields(pid)
	if len(f) < 13 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks, ppid
}

// reapedCPU returns the CPU seconds of a process's children that ended
// and were waited for (cutime and cstime).
func reapedCPU(pid int) float64 {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	cutime, _ := strconv.ParseFloat(f[13], 64)
	cstime, _ := strconv.ParseFloat(f[14], 64)
	return (cutime + cstime) / clockTicks
}

// statFields are the fields of /proc/PID/stat after the command name
// (the state first); nil when unreadable.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command name is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func (a cpuTimes) sub(b cpuTimes) cpuTimes {
	return cpuTimes{Server: a.Server - b.Server, Postgres: a.Postgres - b.Postgres, Generator: a.Generator - b.Generator, Peer: a.Peer - b.Peer}
}

// per divides each figure by n.
func (a cpuTimes) per(n float64) cpuTimes {
	return cpuTimes{Server: a.Server / n, Postgres: a.Postgres / n, Generator: a.Generator / n, Peer: a.Peer / n}
}
