package payments

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
//
// Its text is bounded whatever the request: it lists at most maxListed
// problems (Unlisted counts the rest), and repeats at most maxEcho bytes of
// any value or member name the client sent, cut and saying so.
type ValidationError struct {
	Fields   []FieldError
	Unlisted int
}

// Bounds of a ValidationError's text.
const (
	maxListed = 16
	maxEcho   = 64
)

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Detail
	}
	if e.Unlisted > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", e.Unlisted))
	}
	return "payments: invalid request: " + strings.Join(parts, "; ")
}

// Add records a problem with field, a member name cut to maxEcho bytes; past
// maxListed problems it only counts it.
func (e *ValidationError) Add(field, format string, args ...any) {
	if len(e.Fields) == maxListed {
		e.Unlisted++
		return
	}
	e.Fields = append(e.Fields, FieldError{Field: cut(field), Detail: fmt.Sprintf(format, args...)})
}

// Err returns e when it lists a problem, else nil.
func (e *ValidationError) Err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// echo quotes a value the client sent for an error's text, cut to maxEcho
// bytes, saying so.
func echo(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:runeStart(s, maxEcho)]) + fmt.Sprintf("… (%d bytes, cut)", len(s))
}

// cut cuts a member name to maxEcho bytes, saying so.
func cut(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return s[:runeStart(s, maxEcho)] + fmt.Sprintf("… (%d bytes, cut)", len(s))
}

// runeStart is the largest n' <= n at which a rune of s starts.
func runeStart(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
