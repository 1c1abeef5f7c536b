// Package migrate reads numbered, embedded SQL migrations and renders them
// as one plain script, for teams that run their own migration tool. The
// stores' migration packages apply them, one transaction each.
package migrate

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string // the file name without its number and extension
	SQL     string
}

var fileName = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.sql$`)

// Load reads every NNN_name.sql file at the root of fsys, in version order.
// Versions start at 1 and never repeat. A gap is allowed: each version is
// applied once whatever was applied before it, so two branches can number
// their migrations 002 and 003 independently and land in either order.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		switch {
		case m.Version < 1:
			return nil, fmt.Errorf("migration %03d_%s: versions start at 1", m.Version, m.Name)
		case i > 0 && m.Version == ms[i-1].Version:
			return nil, fmt.Errorf("migration %03d_%s: version %d is taken by %03d_%s", m.Version, m.Name, m.Version, ms[i-1].Version, ms[i-1].Name)
		}
	}
	return ms, nil
}

// Script renders migrations as one plain SQL script, each in its own
// transaction, for teams that apply SQL with their own tool.
func Script(ms []Migration, table string) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "-- %s\nBEGIN;\n%s\nINSERT INTO %s (version, name) VALUES (%d, '%s');\nCOMMIT;\n\n",
			fmt.Sprintf("%03d_%s.sql", m.Version, m.Name), strings.TrimSpace(m.SQL), table, m.Version, m.Name)
	}
	return b.String()
}

// Each applies ms in order with applyOne, which reports whether it applied
// a migration (false: recorded already), and returns the versions applied.
// It stops at the first error, naming the migration.
func Each(ms []Migration, applyOne func(Migration) (bool, error)) ([]int, error) {
	var applied []int
	for _, m := range ms {
		done, err := applyOne(m)
		if err != nil {
			return applied, fmt.Errorf("migration %03d_%s: %w", m.Version, m.Name, err)
		}
		if done {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}
