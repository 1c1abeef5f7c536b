package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Durability is what the server a pool reaches promises about a committed
// key: a record that can vanish after its commit is a payment the next
// retry runs again. CheckDurability reads it; docs/operations.md
// ("Durability") gives the settings that make Findings empty.
type Durability struct {
	Fsync          bool   // fsync
	FullPageWrites bool   // full_page_writes
	SyncCommit     string // synchronous_commit, as the pool's sessions have it
	// SyncStandbyNames is synchronous_standby_names; Standbys the
	// standbys streaming from the server, SyncStandbys those of them
	// whose sync_state is sync or quorum.
	SyncStandbyNames       string
	Standbys, SyncStandbys int
	// Findings are the ways a committed key could be lost, one per
	// setting; empty when none.
	Findings []string
}

// CheckDurability reads the durability settings of the server pool reaches.
// It reads only: services call it at start and log [Durability.Warning].
// Without the pg_read_all_stats role a standby's sync_state is hidden and
// counts as not synchronous.
func CheckDurability(ctx context.Context, pool *pgxpool.Pool) (Durability, error) {
	var d Durability
	var fsync, fpw string
	err := pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('full_page_writes'),
		current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
		(SELECT count(*) FROM pg_stat_replication),
		(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))`).
		Scan(&fsync, &fpw, &d.SyncCommit, &d.SyncStandbyNames, &d.Standbys, &d.SyncStandbys)
	if err != nil {
		return d, fmt.Errorf("read the durability settings: %w", err)
	}
	d.Fsync, d.FullPageWrites = fsync == "on", fpw == "on"
	d.Findings = d.findings()
	return d, nil
}

func (d Durability) findings() []string {
	var f []string
	if !d.Fsync {
		f = append(f, "fsync is off (a crash of the machine can lose commits or corrupt the database)")
	}
	if !d.FullPageWrites {
		f = append(f, "full_page_writes is off (a crash can leave torn pages)")
	}
	if d.SyncCommit == "off" {
		f = append(f, "synchronous_commit is off (a crash loses the last commits)")
	}
	// A server with no standby has no failover to lose commits in; one
	// with standbys may be failed over to one that lacks the last commits.
	if d.Standbys > 0 {
		switch {
		case d.SyncStandbyNames == "" || d.SyncStandbys == 0:
			f = append(f, fmt.Sprintf("no synchronous standby among %d (a failover can lose the last commits)", d.Standbys))
		case d.SyncCommit == "local":
			f = append(f, "synchronous_commit is local (commits do not wait for the synchronous standby; a failover can lose them)")
		}
	}
	return f
}

// Warning is one line for a service's log when a committed key could be
// lost on a crash or a failover; "" when Findings is empty.
func (d Durability) Warning() string {
	if len(d.Findings) == 0 {
		return ""
	}
	return "committed idempotency keys can be lost, and their payments run twice: " + strings.Join(d.Findings, "; ")
}
