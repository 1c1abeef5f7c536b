package pgledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/pgstore"
)

// unit is one Atomic unit of work: a savepoint of the request's ambient
// transaction, or a transaction of its own on a connection of the pool.
// Every statement costs a round trip to the database, so it pipelines:
//
//   - it opens lazily: the SAVEPOINT (or BEGIN) goes in front of the first
//     statement, in the same round trip;
//   - writes whose result nothing reads (balance updates, ledger entries)
//     are queued and go in front of the next statement, or with the
//     RELEASE (or COMMIT) that ends the unit.
//
// A queued write that fails makes the statement it travels with, or the
// commit, fail with its error: the unit fails as a whole either way. Inside
// the request's transaction the unit hands its last queued writes and its
// RELEASE to pgstore.Queue, so they travel with the completion of the key.
type unit struct {
	db      batcher
	conn    *pgxpool.Conn // the unit's own connection, when not in the ambient transaction
	own     bool          // a transaction of its own, not a savepoint
	opened  bool          // SAVEPOINT or BEGIN has been sent
	ended   bool
	pending []queued
	// locked are the balances the unit holds locked, as the unit has set
	// them.
	locked map[balanceKey]payments.Funds
}

type balanceKey struct{ user, currency string }

type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

type queued struct {
	what string
	sql  string
	args []any
}

// savepoint is the name of a unit's savepoint. Units do not nest; if one
// ever did, RELEASE and ROLLBACK TO name the innermost savepoint of the
// name, which is the right one.
const savepoint = "pgledger_unit"

func (l *Ledger) begin(ctx context.Context) (*unit, error) {
	db := l.db(ctx)
	if pool, ok := db.(*pgxpool.Pool); ok {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("pgledger: begin: %w", err)
		}
		return &unit{db: conn, conn: conn, own: true, locked: map[balanceKey]payments.Funds{}}, nil
	}
	return &unit{db: db, locked: map[balanceKey]payments.Funds{}}, nil
}

func (u *unit) open() string {
	if u.own {
		return "BEGIN"
	}
	return "SAVEPOINT " + savepoint
}

func (u *unit) queue(what, sql string, args ...any) {
	u.pending = append(u.pending, queued{what: what, sql: sql, args: args})
}

// send sends b behind the opening statement and the queued writes, and
// returns b's results once theirs are read.
func (u *unit) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	if u.ended {
		return nil, errors.New("pgledger: the unit of work has ended")
	}
	full := &pgx.Batch{}
	head := 0
	if !u.opened {
		full.Queue(u.open())
		head++
	}
	for _, d := range u.pending {
		full.Queue(d.sql, d.args...)
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	pending := u.pending
	u.pending, u.opened = nil, true
	br := u.db.SendBatch(ctx, full)
	for i := range head + len(pending) {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			if i >= head {
				return nil, fmt.Errorf("%s: %w", pending[i-head].what, err)
			}
			// Nothing was opened, so a rollback has nothing to undo (and
			// would only fail again, burying this error under its own).
			u.opened = false
			return nil, fmt.Errorf("pgledger: begin: %w", err)
		}
	}
	return br, nil
}

func (u *unit) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := u.send(ctx, b)
	if err != nil {
		return errRow{err}
	}
	return batchRow{br}
}

// batchRow is the one row of a one-statement batch; Scan closes the batch.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// commit sends the queued writes and the RELEASE (or COMMIT) in one round
// trip.
func (u *unit) commit(ctx context.Context) error {
	if !u.opened && len(u.pending) == 0 {
		u.ended = true
		return nil
	}
	end := "RELEASE SAVEPOINT " + savepoint
	if !u.own && u.queueOnRequest(ctx, end) {
		return nil
	}
	b := &pgx.Batch{}
	if u.own {
		end = "COMMIT"
	}
	b.Queue(end)
	br, err := u.send(ctx, b)
	u.ended = true
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && u.own && tag.String() != "COMMIT" {
		err = errors.New("the transaction was rolled back") // COMMIT of a failed transaction says ROLLBACK
	}
	if err != nil {
		return fmt.Errorf("pgledger: commit: %w", err)
	}
	return nil
}

// queueOnRequest hands the queued writes and the RELEASE to the request's
// ambient transaction (pgstore.Queue): they go with its next statement,
// which is usually the completion of the key and the COMMIT, so the unit
// ends without a round trip of its own. It reports false when ctx carries
// no ambient transaction.
func (u *unit) queueOnRequest(ctx context.Context, release string) bool {
	writes := u.pending
	if u.opened {
		writes = append(writes, queued{what: "pgledger: commit", sql: release})
	}
	if !pgstore.Queue(ctx, writes[0].what, writes[0].sql, writes[0].args...) {
		return false
	}
	// The rest cannot be refused: the transaction is the handler's, and
	// nothing else ends it in between.
	for _, d := range writes[1:] {
		pgstore.Queue(ctx, d.what, d.sql, d.args...)
	}
	u.pending, u.ended = nil, true
	return true
}

// rollback undoes what the unit sent; queued writes are dropped unsent.
func (u *unit) rollback(ctx context.Context) error {
	u.pending = nil
	if u.ended || !u.opened {
		u.ended = true
		return nil
	}
	u.ended = true
	b := &pgx.Batch{}
	if u.own {
		b.Queue("ROLLBACK")
	} else {
		b.Queue("ROLLBACK TO SAVEPOINT " + savepoint)
		b.Queue("RELEASE SAVEPOINT " + savepoint)
	}
	if err := u.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgledger: rollback: %w", err)
	}
	return nil
}

// close returns the unit's own connection to the pool, rolling back
// whatever is left open.
func (u *unit) close(ctx context.Context) {
	if u.conn == nil {
		return
	}
	if u.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = u.conn.Exec(ctx, "ROLLBACK")
	}
	u.conn.Release()
}

var (
	_ pgx.Row = batchRow{}
	_ batcher = pgstore.DBTX(nil)
)
