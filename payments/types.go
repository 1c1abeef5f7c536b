package payments

import "time"

// Status is the state of a transaction. Every transaction paymentsd makes is
// COMPLETED at once; the other states exist so that the minute net can
// ignore transactions that did not, or no longer, move money.
type Status string

// The states of a transaction.
const (
	StatusPending   Status = "PENDING"
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
)

// Deposit is money paid into one of a user's balances.
type Deposit struct {
	ID        string
	UserID    string
	Currency  string
	Amount    int64 // minor units, > 0
	CreatedAt time.Time
}

// Transaction is a conversion between two of a user's balances: Amount
// leaves the source balance and ConvertedAmount enters the target balance.
type Transaction struct {
	ID              string
	UserID          string
	SourceCurrency  string
	TargetCurrency  string
	Amount          int64  // minor units of SourceCurrency, > 0
	ConvertedAmount int64  // minor units of TargetCurrency, > 0
	Rate            string // target units per source major unit, exactly as applied
	Status          Status
	CreatedAt       time.Time
}

// Balance is what a user holds in one currency.
type Balance struct {
	Currency string
	Amount   int64 // minor units, >= 0
}

// Entry is one line of the ledger: a signed change to one balance, made by
// one deposit, one transaction or one payout.
type Entry struct {
	UserID        string
	Currency      string
	Amount        int64  // > 0 credits the balance, < 0 debits it
	DepositID     string // set for a deposit's credit
	TransactionID string // set for a transaction's debit and credit
	PayoutID      string // set for a payout's debit and its refund
	// ID and CreatedAt are the ledger's, set on the entries Ledger.Entries
	// reads; InsertEntries ignores them.
	ID        int64
	CreatedAt time.Time
}

// Movement is what makes ledger entries: a deposit, a transaction or a
// payout.
type Movement string

// The movements.
const (
	MovementDeposit     Movement = "deposit"
	MovementTransaction Movement = "transaction"
	MovementPayout      Movement = "payout"
)

// Valid reports whether m is one of the movements.
func (m Movement) Valid() bool {
	return m == MovementDeposit || m == MovementTransaction || m == MovementPayout
}

// DepositRequest asks for a deposit.
type DepositRequest struct {
	Currency string
	Amount   int64
}

// TransferRequest asks to convert Amount of SourceCurrency into
// TargetCurrency.
type TransferRequest struct {
	SourceCurrency string
	TargetCurrency string
	Amount         int64
}

// PayoutStatus is the state of a payout.
type PayoutStatus string

// The states of a payout. A payout is debited when it is made, pending
// until the bank's outcome is known, then paid, or failed and refunded.
const (
	PayoutPending PayoutStatus = "pending"
	PayoutPaid    PayoutStatus = "paid"
	PayoutFailed  PayoutStatus = "failed"
)

// Payout is money sent out of a user's balance to an account at the bank.
type Payout struct {
	ID          string
	UserID      string
	Currency    string
	Amount      int64 // minor units, > 0
	Destination string
	Status      PayoutStatus
	// BankKey is the idempotency key the payout is sent to the bank with:
	// derived from the request's key and its record's life, never the
	// client's key (idem.ProviderKey).
	BankKey string
	// BankTransferID is the bank's id of the transfer, once it answered.
	BankTransferID string
	// BankOutcomeCause is why the bank's outcome of a pending payout is
	// unknown: BankOutcome.Cause of the last call that got no outcome.
	// "" while none has failed, and once the payout is paid or failed.
	BankOutcomeCause string
	CreatedAt        time.Time
}

// PayoutRequest asks for a payout.
type PayoutRequest struct {
	Currency    string
	Amount      int64
	Destination string
}
