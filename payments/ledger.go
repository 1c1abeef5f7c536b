package payments

import (
	"context"
	"time"

	"github.com/idem-dev/idem/store"
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

	// ReleaseKeys clears the Idempotency-Key of the deposits and
	// transactions that carry one of keys, and returns how many it cleared.
	// Keys whose Scope is not a user id are ignored.
	ReleaseKeys(ctx context.Context, keys []store.KeyRef) (int64, error)
	// ReleaseExpiredKeys clears, at most limit at a time, the
	// Idempotency-Key of deposits and transactions whose key record in the
	// idem store has expired or is gone. It returns how many it cleared.
	ReleaseExpiredKeys(ctx context.Context, limit int) (int64, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
}

// LedgerTx is the unit of work of Ledger.Atomic.
type LedgerTx interface {
	// LockBalance creates the user's balance row in currency at zero when
	// it is missing, locks it until the unit of work ends, and returns its
	// amount.
	LockBalance(ctx context.Context, userID, currency string) (int64, error)
	// SetBalance sets a balance row that LockBalance locked.
	SetBalance(ctx context.Context, userID, currency string, amount int64) error
	// InsertDeposit stores d, with key as its Idempotency-Key ("" for
	// none), and returns its creation time (the database's clock; for an
	// embedded database, the process's). When a net fires it stores
	// nothing and returns inserted false, never an error: the transaction
	// stays usable.
	InsertDeposit(ctx context.Context, d Deposit, key string) (created time.Time, inserted bool, err error)
	// InsertTransaction stores t as InsertDeposit stores a deposit.
	InsertTransaction(ctx context.Context, t Transaction, key string) (created time.Time, inserted bool, err error)
	// KeyBound reports whether a movement of the kind already carries the
	// user's key: which net fired.
	KeyBound(ctx context.Context, kind Kind, userID, key string) (bool, error)
	// ReleaseStaleKey clears the user's key from a movement of the kind
	// that is older than retention and was made before the key's current
	// idempotency record began (the record expired and a new request took
	// the key before the sweeper released it), and reports whether it did.
	// A movement within retention keeps its key even when its record is
	// gone (a botched restore, a path without the middleware): that is
	// what the key net guards.
	ReleaseStaleKey(ctx context.Context, kind Kind, userID, key string, retention time.Duration) (bool, error)
	// InsertEntries appends entries to the ledger.
	InsertEntries(ctx context.Context, entries ...Entry) error
}

// Kind is a kind of movement: each has its own table and key net.
type Kind int

// The kinds of movement.
const (
	KindDeposit Kind = iota
	KindTransaction
)

// Table is the name of the kind's table, the same in every ledger.
func (k Kind) Table() string {
	if k == KindDeposit {
		return "deposits"
	}
	return "transactions"
}
