package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Machine is what the figures were measured on.
type Machine struct {
	Date       string
	CPUs       int
	CPUModel   string
	MemTotal   string
	Kernel     string
	Go         string
	Postgres   string
	Settings   map[string]string // the PostgreSQL settings that bound commits
	LoadBefore string
	LoadAfter  string
}

func describeMachine() Machine {
	m := Machine{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m *Machine) fromDatabase(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&m.Postgres); err != nil {
		return err
	}
	if i := strings.Index(m.Postgres, " on "); i > 0 {
		m.Postgres = m.Postgres[:i]
	}
	m.Settings = map[string]string{}
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers", "max_connections"} {
		var v string
		if err := pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			return err
		}
		m.Settings[name] = v
	}
	return nil
}

// durable reports whether commits wait for the disk.
func (m Machine) durable() bool {
	return m.Settings["fsync"] == "on" && m.Settings["synchronous_commit"] == "on"
}

func procField(path, field string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == field {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
