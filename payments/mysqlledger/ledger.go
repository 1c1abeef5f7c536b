// Package mysqlledger is the MySQL and MariaDB (InnoDB) Ledger of package
// payments. Its tables live beside mysqlstore's key table in one database;
// open it with mysqlstore.Open and create them with Migrate.
//
// Every unit of work runs at READ COMMITTED: inside a request it runs in
// the store's transaction, which is at READ COMMITTED whatever the
// server's default (REPEATABLE READ for InnoDB), and a unit of its own
// runs at the same level, so that both behave alike. A unit locks the balances it changes with SELECT … FOR
// UPDATE, in the order the Service asks for them; a locking read sees the
// latest committed balance at any isolation level. A unit first locks its
// user's row, so that the units of one user run one at a time: InnoDB
// checks a new row's key with gap locks, even at READ COMMITTED, and two
// units creating a user's missing balance while a third rolls its own
// creation back (a conversion from a currency never held) deadlock on the
// gap. PostgreSQL's ON CONFLICT has no such gap; there the units of one
// user in different currencies run side by side.
package mysqlledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/internal/sqlledger"
	"github.com/idem-dev/idem/sqlstore"
)

// Ledger keeps the wallet in MySQL or MariaDB. It is a [payments.Ledger].
type Ledger struct {
	base
}

// base is embedded under an unexported name: only its methods, the reads
// and Ping of payments.Ledger, are promoted.
type base = sqlledger.Ledger

var _ payments.Ledger = (*Ledger)(nil)

// New returns a Ledger on db, which should come from mysqlstore.Open.
func New(db *sql.DB) *Ledger {
	return &Ledger{base: sqlledger.New(db, sqlledger.Dialect{
		AmbientFunc: func(ctx context.Context) sqlledger.DBTX { return sqlstore.DB(ctx, nil) },
		Name:        "mysqlledger",
		CreatedAt:   micros("created_at"),
		// SUM of a BIGINT is a DECIMAL in MySQL.
		SumAmount: "CAST(SUM(amount) AS SIGNED)",
		Savepoint: "mysqlledger_unit",
		// See the package documentation.
		TxOptions: &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	})}
}

// micros is a DATETIME(6) column as microseconds since the Unix epoch, so
// reads need no time parsing from the driver (parseTime may be off).
func micros(column string) string {
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + column + ")"
}

// Atomic runs fn in a savepoint of the ambient transaction, or in a READ
// COMMITTED transaction of its own. Rolling back to the savepoint undoes
// fn's writes and leaves the ambient transaction usable, so a business
// error still ends as a stored response.
func (l *Ledger) Atomic(ctx context.Context, fn func(payments.LedgerTx) error) error {
	return sqlledger.Unit(ctx, &l.base, func(db sqlledger.DBTX) error { return fn(ledgerTx{&unit{db: db}}) })
}

type ledgerTx struct{ u *unit }

// unit is one unit of work's connection and the user it holds locked.
type unit struct {
	db   sqlledger.DBTX
	user string // "" before the first statement
}

// db returns the unit's connection once it holds userID's row locked (see
// the package documentation). A unit touches one user's rows.
func (t ledgerTx) db(ctx context.Context, userID string) (sqlledger.DBTX, error) {
	switch t.u.user {
	case userID:
		return t.u.db, nil
	case "":
	default:
		return nil, fmt.Errorf("mysqlledger: a unit of work of user %s touched user %s", t.u.user, userID)
	}
	var one int
	if err := t.u.db.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = ? FOR UPDATE`, userID).Scan(&one); err != nil {
		return nil, fmt.Errorf("mysqlledger: lock user: %w", err)
	}
	t.u.user = userID
	return t.u.db, nil
}

const lockBalance = `SELECT amount, reserved FROM balances WHERE user_id = ? AND currency = ? FOR UPDATE`

// LockBalance reads and locks the balance in one statement; only a balance
// that does not exist yet costs two more, to create it and lock it.
func (t ledgerTx) LockBalance(ctx context.Context, userID, currency string) (payments.Funds, error) {
	var f payments.Funds
	db, err := t.db(ctx, userID)
	if err != nil {
		return f, err
	}
	err = db.QueryRowContext(ctx, lockBalance, userID, currency).Scan(&f.Amount, &f.Reserved)
	if !errors.Is(err, sql.ErrNoRows) {
		if err != nil {
			return f, fmt.Errorf("mysqlledger: lock balance: %w", err)
		}
		return f, nil
	}
	// A no-op update on a row that exists after all.
	if _, err := db.ExecContext(ctx, `INSERT INTO balances (user_id, currency, amount, updated_at)
	    VALUES (?, ?, 0, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE user_id = user_id`, userID, currency); err != nil {
		return f, fmt.Errorf("mysqlledger: create balance: %w", err)
	}
	if err := db.QueryRowContext(ctx, lockBalance, userID, currency).Scan(&f.Amount, &f.Reserved); err != nil {
		return f, fmt.Errorf("mysqlledger: lock balance: %w", err)
	}
	return f, nil
}

func (t ledgerTx) SetBalance(ctx context.Context, userID, currency string, f payments.Funds) error {
	db, err := t.db(ctx, userID)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `UPDATE balances SET amount = ?, reserved = ?, updated_at = UTC_TIMESTAMP(6) WHERE user_id = ? AND currency = ?`,
		f.Amount, f.Reserved, userID, currency)
	if err != nil {
		return fmt.Errorf("mysqlledger: set balance: %w", err)
	}
	return nil
}

// A net that fires makes the INSERT a no-op update of the row it met,
// which changes nothing: no error, and the transaction goes on. (INSERT
// IGNORE would turn other errors, a CHECK say, into warnings too.)
func (t ledgerTx) InsertDeposit(ctx context.Context, d payments.Deposit, key string) (time.Time, bool, error) {
	return t.insert(ctx, "deposits", d.UserID, d.ID, `
INSERT INTO deposits (id, user_id, currency, amount, idempotency_key, created_at)
VALUES (?, ?, ?, ?, NULLIF(?, ''), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE user_id = user_id`, d.ID, d.UserID, d.Currency, d.Amount, key)
}

func (t ledgerTx) InsertTransaction(ctx context.Context, tr payments.Transaction, key string) (time.Time, bool, error) {
	return t.insert(ctx, "transactions", tr.UserID, tr.ID, `
INSERT INTO transactions (id, user_id, source_currency, target_currency, amount, converted_amount, rate, status, idempotency_key, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE user_id = user_id`, tr.ID, tr.UserID, tr.SourceCurrency, tr.TargetCurrency, tr.Amount, tr.ConvertedAmount,
		tr.Rate, string(tr.Status), key)
}

// insert runs a movement's insert; the driver counts changed rows, so 1 is
// an insert and 0 a net that fired.
func (t ledgerTx) insert(ctx context.Context, table, userID, id, query string, args ...any) (time.Time, bool, error) {
	db, err := t.db(ctx, userID)
	if err != nil {
		return time.Time{}, false, err
	}
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mysqlledger: insert into %s: %w", table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mysqlledger: insert into %s: %w", table, err)
	}
	if n != 1 {
		return time.Time{}, false, nil
	}
	at, err := created(ctx, db, table, userID, id)
	return at, err == nil, err
}

// created reads back the creation time a row was given by the database's
// clock: MySQL has no INSERT … RETURNING.
func created(ctx context.Context, db sqlledger.DBTX, table, userID, id string) (time.Time, error) {
	var us int64
	err := db.QueryRowContext(ctx, `SELECT `+micros("created_at")+` FROM `+table+` WHERE user_id = ? AND id = ?`, userID, id).Scan(&us)
	if err != nil {
		return time.Time{}, fmt.Errorf("mysqlledger: read %s: %w", table, err)
	}
	return sqlledger.FromMicros(us), nil
}

// InsertEntries appends the entries in one statement.
func (t ledgerTx) InsertEntries(ctx context.Context, entries ...payments.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	db, err := t.db(ctx, entries[0].UserID)
	if err != nil {
		return err
	}
	rows := make([]string, len(entries))
	args := make([]any, 0, 6*len(entries))
	for i, e := range entries {
		rows[i] = `(?, ?, ?, NULLIF(?, ''), NULLIF(?, ''), NULLIF(?, ''), UTC_TIMESTAMP(6))`
		args = append(args, e.UserID, e.Currency, e.Amount, e.DepositID, e.TransactionID, e.PayoutID)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO ledger_entries (user_id, currency, amount, deposit_id, transaction_id, payout_id, created_at)
VALUES `+strings.Join(rows, ", "), args...)
	if err != nil {
		return fmt.Errorf("mysqlledger: insert entries: %w", err)
	}
	return nil
}

// InsertPayout stores a pending payout. bank_key is unique: a second
// payout with one fails.
func (t ledgerTx) InsertPayout(ctx context.Context, p payments.Payout, key string) (time.Time, error) {
	db, err := t.db(ctx, p.UserID)
	if err != nil {
		return time.Time{}, err
	}
	_, err = db.ExecContext(ctx, `
INSERT INTO payouts (id, user_id, currency, amount, destination, status, bank_key, idempotency_key, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
		p.ID, p.UserID, p.Currency, p.Amount, p.Destination, string(p.Status), p.BankKey, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("mysqlledger: insert payout: %w", err)
	}
	return created(ctx, db, "payouts", p.UserID, p.ID)
}

// SetPayoutStatus records a pending payout's outcome, once.
func (t ledgerTx) SetPayoutStatus(ctx context.Context, userID, id string, status payments.PayoutStatus, transferID string) error {
	return t.setPending(ctx, "set payout status", `status = ?, bank_transfer_id = NULLIF(?, ''), bank_outcome_cause = NULL`,
		userID, id, string(status), transferID)
}

// SetPayoutCause records why a pending payout's bank outcome is unknown.
func (t ledgerTx) SetPayoutCause(ctx context.Context, userID, id, cause string) error {
	return t.setPending(ctx, "set payout cause", `bank_outcome_cause = NULLIF(?, '')`, userID, id, cause)
}

// setPending sets the columns of set (its placeholders taken by args) on
// the user's pending payout id, and fails when it is not pending. MySQL
// counts changed rows, not matched ones, so updated_at always moves on
// (by a microsecond at least): a cause set twice still counts.
func (t ledgerTx) setPending(ctx context.Context, what, set, userID, id string, args ...any) error {
	db, err := t.db(ctx, userID)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, `
UPDATE payouts SET `+set+`, updated_at = GREATEST(UTC_TIMESTAMP(6), updated_at + INTERVAL 1 MICROSECOND)
 WHERE user_id = ? AND id = ? AND status = 'pending'`, append(args, userID, id)...)
	if err != nil {
		return fmt.Errorf("mysqlledger: %s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("mysqlledger: %s: payout %s is not pending (%v)", what, id, err)
	}
	return nil
}
