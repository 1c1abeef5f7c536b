// Package sqlledger is what the database/sql Ledgers of package payments
// (sqliteledger, mysqlledger) share: the units of work, and the reads,
// which differ between the databases only in a few expressions.
package sqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// DBTX is a pool, a transaction or a request's ambient transaction.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Dialect is what a database changes in the Ledger. Every field is
// required but TxOptions.
type Dialect struct {
	// Name prefixes every error: the Ledger's package name.
	Name string
	// AmbientFunc returns the request's ambient transaction, or nil.
	AmbientFunc func(context.Context) DBTX
	// CreatedAt is the created_at column as microseconds since the Unix
	// epoch.
	CreatedAt string
	// SumAmount is the sum of the amount column as a 64-bit integer.
	SumAmount string
	// Savepoint names the savepoint a unit of work runs in inside the
	// ambient transaction.
	Savepoint string
	// TxOptions begin a unit of work's own transaction; nil for the
	// driver's default.
	TxOptions *sql.TxOptions
}

// Ledger answers payments.Ledger's reads; a database's Ledger embeds it.
// Its only exported methods are those reads and Ping, so that embedding
// adds nothing else to the database's Ledger.
type Ledger struct {
	db *sql.DB
	d  Dialect
}

// New returns a Ledger on db in dialect d.
func New(db *sql.DB, d Dialect) Ledger { return Ledger{db: db, d: d} }

// conn is the request's ambient transaction, or the pool.
func (l *Ledger) conn(ctx context.Context) DBTX {
	if amb := l.d.AmbientFunc(ctx); amb != nil {
		return amb
	}
	return l.db
}

// Unit runs fn in a savepoint of the ambient transaction, or in a
// transaction of its own. Rolling back to the savepoint undoes fn's writes
// and leaves the ambient transaction usable. (A function, not a method: see
// Ledger.)
func Unit(ctx context.Context, l *Ledger, fn func(DBTX) error) error {
	if amb := l.d.AmbientFunc(ctx); amb != nil {
		return l.savepoint(ctx, amb, fn)
	}
	tx, err := l.db.BeginTx(ctx, l.d.TxOptions)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", l.d.Name, err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", l.d.Name, err)
	}
	return nil
}

func (l *Ledger) savepoint(ctx context.Context, db DBTX, fn func(DBTX) error) error {
	if _, err := db.ExecContext(ctx, `SAVEPOINT `+l.d.Savepoint); err != nil {
		return fmt.Errorf("%s: savepoint: %w", l.d.Name, err)
	}
	if err := fn(db); err != nil {
		// Undo fn's writes, not the request's: the transaction goes on.
		// This must run even when ctx is done. (A MySQL deadlock's victim
		// has lost its whole transaction, savepoint included: that error
		// says so beside fn's.)
		wctx := context.WithoutCancel(ctx)
		if _, rerr := db.ExecContext(wctx, `ROLLBACK TO SAVEPOINT `+l.d.Savepoint); rerr != nil {
			return errors.Join(err, fmt.Errorf("%s: rollback to savepoint: %w", l.d.Name, rerr))
		}
		if _, rerr := db.ExecContext(wctx, `RELEASE SAVEPOINT `+l.d.Savepoint); rerr != nil {
			return errors.Join(err, fmt.Errorf("%s: release savepoint: %w", l.d.Name, rerr))
		}
		return err
	}
	if _, err := db.ExecContext(ctx, `RELEASE SAVEPOINT `+l.d.Savepoint); err != nil {
		return fmt.Errorf("%s: release savepoint: %w", l.d.Name, err)
	}
	return nil
}

// FromMicros is a time as the tables keep it, in microseconds since the
// Unix epoch.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
