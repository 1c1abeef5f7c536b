package payments

import (
	"context"
	"time"
)

// Ledger is the storage a Service runs on: one small implementation per
// database (pgledger, sqliteledger), holding the SQL and nothing else. The
// business rules (validation, amounts, lock order, which entries a movement
// makes) live in Service, once.
//
// Every method reaches the database through the store package's ambient
// accessor (pgstore.DB, sqlitestore.DB), so inside an idempotent request it
// runs in the transaction that also completes the request's key.
type Ledger interface {
	// Atomic runs fn as one all-or-nothing unit of work: a savepoint inside
	// the request's ambient transaction when ctx carries one, else a
	// transaction of its own. When fn fails, everything it wrote is undone
	// and the ambient transaction stays usable.
	Atomic(ctx context.Context, fn func(LedgerTx) error) error

	// Deposit returns a user's deposit, or ErrNotFound.
	Deposit(ctx context.Context, userID, id string) (Deposit, error)
	// Transaction returns a user's transaction, or ErrNotFound.
	Transaction(ctx context.Context, userID, id string) (Transaction, error)
	// Payout returns a user's payout, or ErrNotFound.
	Payout(ctx context.Context, userID, id string) (Payout, error)
	// PayoutByBankKey returns the user's payout sent with bankKey, or
	// ErrNotFound.
	PayoutByBankKey(ctx context.Context, userID, bankKey string) (Payout, error)
	// Entries returns the ledger entries that a user's movement m (a
	// deposit, transaction or payout) of this id wrote, in the order they
	// were written; none for an unknown id. m is valid.
	Entries(ctx context.Context, userID string, m Movement, id string) ([]Entry, error)
	// Balances returns a user's balance rows, ordered by currency.
	Balances(ctx context.Context, userID string) ([]Balance, error)
	// EntryTotals returns the sum of a user's ledger entries per currency,
	// ordered by currency: what the balance rows must agree with.
	EntryTotals(ctx context.Context, userID string) ([]Balance, error)

	// CreateUser stores a user and the SHA-256 hash of its API key.
	CreateUser(ctx context.Context, userID string, keyHash []byte) error
	// UserByKeyHash returns the user whose API key hashes to keyHash, or
	// ErrUnauthorized.
	UserByKeyHash(ctx context.Context, keyHash []byte) (string, error)
	// HasUsers reports whether any user exists.
	HasUsers(ctx context.Context) (bool, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
}

// Funds is a balance row: what the user holds in one currency, and what the
// user's pending payouts in it hold of the balance limit. A payout moves its
// amount from Amount to Reserved when it is debited; its refund moves it
// back, so a refund never needs headroom it was not kept (docs/payouts.md).
type Funds struct {
	Amount   int64
	Reserved int64
}

// LedgerTx is the unit of work of Ledger.Atomic.
type LedgerTx interface {
	// LockBalance creates the user's balance row in currency at zero when
	// it is missing, locks it until the unit of work ends, and returns it.
	LockBalance(ctx context.Context, userID, currency string) (Funds, error)
	// SetBalance sets a balance row that LockBalance locked.
	SetBalance(ctx context.Context, userID, currency string, f Funds) error
	// InsertDeposit stores d, with key, the request's Idempotency-Key ("" for
	// none), as plain data for support: it binds nothing. It returns the
	// deposit's creation time (the database's clock; for an embedded
	// database, the process's). When a net fires it stores nothing and
	// returns inserted false, never an error: the transaction stays usable.
	InsertDeposit(ctx context.Context, d Deposit, key string) (created time.Time, inserted bool, err error)
	// InsertTransaction stores t as InsertDeposit stores a deposit.
	InsertTransaction(ctx context.Context, t Transaction, key string) (created time.Time, inserted bool, err error)
	// InsertPayout stores p, with key, the request's Idempotency-Key, as
	// plain data, and returns its creation time. p.BankKey is unique.
	InsertPayout(ctx context.Context, p Payout, key string) (created time.Time, err error)
	// SetPayoutStatus records a pending payout's outcome: status, and the
	// bank's transfer id ("" for none), and clears its bank outcome cause.
	// It fails when the payout is not pending: an outcome is recorded once.
	SetPayoutStatus(ctx context.Context, userID, id string, status PayoutStatus, bankTransferID string) error
	// SetPayoutCause records why a pending payout's bank outcome is
	// unknown (Payout.BankOutcomeCause; "" for none). It fails when the
	// payout is not pending.
	SetPayoutCause(ctx context.Context, userID, id, cause string) error
	// InsertEntries appends entries to the ledger.
	InsertEntries(ctx context.Context, entries ...Entry) error
}
