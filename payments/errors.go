package payments

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the service. Ledgers translate their driver's errors into these
// at their boundary.
var (
	// ErrNotFound: no such deposit or transaction for this user (another
	// user's is not found either).
	ErrNotFound = errors.New("payments: not found")
	// ErrUnauthorized: the API key is unknown.
	ErrUnauthorized = errors.New("payments: unknown API key")
	// ErrDuplicate: a net on the business tables fired; nothing moved.
	ErrDuplicate = errors.New("payments: duplicate")
	// ErrDuplicateTransfer: the minute net fired. The user made a live
	// transaction with the same currencies and amount in the same UTC minute.
	ErrDuplicateTransfer = fmt.Errorf("%w: an identical transaction was made in the same minute", ErrDuplicate)
	// ErrDuplicateDeposit: the deposits' minute net fired. The user made a
	// deposit of the same currency and amount in the same UTC minute.
	ErrDuplicateDeposit = fmt.Errorf("%w: an identical deposit was made in the same minute", ErrDuplicate)
)

// InsufficientFundsError says a transaction needs more than its source
// balance holds. Nothing moved.
type InsufficientFundsError struct {
	Currency  string
	Balance   int64
	Requested int64
}

func (e *InsufficientFundsError) Error() string {
	return fmt.Sprintf("payments: insufficient funds: the %s balance is %d, the transaction needs %d", e.Currency, e.Balance, e.Requested)
}

// BalanceLimitError says a credit would take a balance, with what its
// pending payouts reserve for their refunds, past the service's MaxBalance.
// Nothing moved.
type BalanceLimitError struct {
	Currency string
	Balance  int64
	Reserved int64 // held for the refunds of pending payouts
	Credit   int64
	Limit    int64
}

func (e *BalanceLimitError) Error() string {
	return fmt.Sprintf("payments: crediting %d to the %s balance of %d (%d reserved by pending payouts) would exceed the limit of %d",
		e.Credit, e.Currency, e.Balance, e.Reserved, e.Limit)
}

// FieldError is what is wrong with one field of a request.
type FieldError struct {
	Field  string // the JSON member name
	Detail string
}

// ValidationError lists what is wrong with a request. Nothing moved.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Detail
	}
	return "payments: invalid request: " + strings.Join(parts, "; ")
}

// Add records a problem with field.
func (e *ValidationError) Add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// Err returns e when it lists a problem, else nil.
func (e *ValidationError) Err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}
