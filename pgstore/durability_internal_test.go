package pgstore

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// The standby rules: a server without standbys has no failover to lose
// commits in; with standbys, one must be synchronous and commits must wait
// for it.
func TestDurabilityFindings(t *testing.T) {
	t.Parallel()
	safe := Durability{Fsync: true, FullPageWrites: true, SyncCommit: "on"}
	for _, tc := range []struct {
		name string
		edit func(*Durability)
		want string // "" for no finding
	}{
		{"NoStandby", func(*Durability) {}, ""},
		{"SyncStandby", func(d *Durability) { d.Standbys, d.SyncStandbys, d.SyncStandbyNames = 2, 1, "ANY 1 (a, b)" }, ""},
		{"AsyncStandby", func(d *Durability) { d.Standbys = 1 }, "no synchronous standby among 1"},
		{"NamesSetNoneStreaming", func(d *Durability) { d.Standbys, d.SyncStandbyNames = 1, "a" }, "no synchronous standby"},
		{"LocalCommit", func(d *Durability) {
			d.Standbys, d.SyncStandbys, d.SyncStandbyNames, d.SyncCommit = 1, 1, "a", "local"
		}, "synchronous_commit is local"},
		{"LocalCommitNoStandby", func(d *Durability) { d.SyncCommit = "local" }, ""},
		{"FsyncOff", func(d *Durability) { d.Fsync = false }, "fsync is off"},
		{"FullPageWritesOff", func(d *Durability) { d.FullPageWrites = false }, "full_page_writes is off"},
		{"SyncCommitOff", func(d *Durability) { d.SyncCommit = "off" }, "synchronous_commit is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := safe
			tc.edit(&d)
			d.Findings = d.findings()
			if tc.want == "" {
				require.Equal(t, "", d.Warning())
				return
			}
			require.Equal(t, 1, len(d.Findings))
			require.True(t, strings.Contains(d.Warning(), tc.want), d.Warning())
		})
	}
}
