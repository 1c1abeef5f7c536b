package payments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Bank is where payouts go: a downstream that cannot roll back, with its
// own idempotency by key (cmd/bankd speaks its protocol; package bankhttp
// is its client).
type Bank interface {
	// Send asks the bank to transfer p.Amount of p.Currency to
	// p.Destination under the idempotency key key. The same key again
	// gets the first outcome. A Send that gets no answer (a timeout, a
	// reset, a 5xx) is BankUnknown: it may have executed.
	Send(ctx context.Context, key string, p Payout) BankOutcome
	// Find asks the bank what it recorded under key: BankNotFound when it
	// knows no transfer of the key (yet: a request in flight may still
	// execute), BankUnknown when it did not answer.
	Find(ctx context.Context, key string) BankOutcome
}

// BankStatus is what the bank said about a transfer.
type BankStatus int

// What a bank call can learn.
const (
	BankUnknown  BankStatus = iota // no answer: the transfer may or may not have executed
	BankSettled                    // executed: money left
	BankRejected                   // refused, for good: no money moved, ever
	BankNotFound                   // Find only: no transfer recorded under the key
)

// BankOutcome is the answer of a bank call.
type BankOutcome struct {
	Status     BankStatus
	TransferID string // the bank's id, when it recorded a transfer
	Err        error  // why the outcome is unknown
	// Cause classifies Err for the person who resolves the payout:
	// idem.UnknownCause's (idem.CauseTimeout, idem.CauseReset,
	// idem.CauseNoAnswer), CauseCutAnswer or CauseBankError.
	Cause string
}

// Why a bank call's outcome is unknown when the bank did answer
// (BankOutcome.Cause).
const (
	// CauseCutAnswer: the bank's answer was cut or unreadable: a status
	// came, the transfer it should carry did not.
	CauseCutAnswer = "cut-answer"
	// CauseBankError: the bank answered without an outcome: an error
	// status (a 500, a key it will not reuse) or a transfer in no final
	// state.
	CauseBankError = "bank-error"
)

// checkPayout validates a payout request.
func (s *Service) checkPayout(req PayoutRequest) error {
	var v ValidationError
	s.checkCurrency(&v, "currency", req.Currency)
	checkAmount(&v, "amount", req.Amount)
	switch d := req.Destination; {
	case d == "":
		v.Add("destination", "is required")
	case len(d) > 255:
		v.Add("destination", "must be at most 255 bytes")
	case d != strings.TrimSpace(d):
		v.Add("destination", "must not begin or end with spaces")
	case !printable(d):
		v.Add("destination", "must be UTF-8 text without control characters (NUL, line breaks, escapes)")
	}
	return v.Err()
}

// printable reports whether s is UTF-8 without control characters: text
// every database keeps (PostgreSQL refuses NUL and invalid UTF-8 in text)
// and every log and console shows as it is.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// DebitPayout makes a pending payout and takes its amount from the user's
// balance, atomically: the payout row, one debit and its ledger entry.
// bankKey is the key it will be sent to the bank with; key the request's
// Idempotency-Key, kept as plain data. A balance short of the amount is
// InsufficientFundsError, and nothing is written. The amount stays reserved
// under the balance limit until the outcome is known, so that its refund
// always fits.
func (s *Service) DebitPayout(ctx context.Context, userID, key, bankKey string, req PayoutRequest) (Payout, error) {
	if err := s.checkPayout(req); err != nil {
		return Payout{}, err
	}
	p := Payout{
		ID: uuid.NewString(), UserID: userID, Currency: req.Currency, Amount: req.Amount,
		Destination: req.Destination, Status: PayoutPending, BankKey: bankKey,
	}
	err := s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		bal, err := tx.LockBalance(ctx, userID, p.Currency)
		if err != nil {
			return err
		}
		if bal.Amount < p.Amount {
			return &InsufficientFundsError{Currency: p.Currency, Balance: bal.Amount, Requested: p.Amount}
		}
		if p.CreatedAt, err = tx.InsertPayout(ctx, p, key); err != nil {
			return err
		}
		bal.Amount -= p.Amount
		bal.Reserved += p.Amount
		if err := tx.SetBalance(ctx, userID, p.Currency, bal); err != nil {
			return err
		}
		return tx.InsertEntries(ctx, Entry{UserID: userID, Currency: p.Currency, Amount: -p.Amount, PayoutID: p.ID})
	})
	if err != nil {
		return Payout{}, err
	}
	return p, nil
}

// SettlePayout records that the bank executed p's transfer, and frees the
// headroom its refund had reserved.
func (s *Service) SettlePayout(ctx context.Context, p Payout, transferID string) (Payout, error) {
	if transferID == "" {
		return Payout{}, errors.New("payments: settle payout: no bank transfer id")
	}
	err := s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		if err := tx.SetPayoutStatus(ctx, p.UserID, p.ID, PayoutPaid, transferID); err != nil {
			return err
		}
		bal, err := tx.LockBalance(ctx, p.UserID, p.Currency)
		if err != nil {
			return err
		}
		bal.Reserved -= p.Amount
		return tx.SetBalance(ctx, p.UserID, p.Currency, bal)
	})
	if err != nil {
		return Payout{}, err
	}
	p.Status, p.BankTransferID, p.BankOutcomeCause = PayoutPaid, transferID, ""
	return p, nil
}

// MarkPayoutUnknown records on pending payout p why its bank outcome is
// unknown (BankOutcome.Cause), for the person who resolves it. Settling
// or refunding the payout clears it.
func (s *Service) MarkPayoutUnknown(ctx context.Context, p Payout, cause string) error {
	err := s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		return tx.SetPayoutCause(ctx, p.UserID, p.ID, cause)
	})
	if err != nil {
		return fmt.Errorf("payments: mark payout unknown: %w", err)
	}
	return nil
}

// RefundPayout records that the bank rejected p's transfer for good, and
// returns its amount to the balance with a ledger entry. Only a definitive
// rejection may refund: a bank that knows no transfer of the key, or does
// not answer, may still execute it (model/payout.pml, rule 2). The refund
// takes the headroom DebitPayout reserved, so the balance limit never
// refuses it.
func (s *Service) RefundPayout(ctx context.Context, p Payout, transferID string) (Payout, error) {
	err := s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		if err := tx.SetPayoutStatus(ctx, p.UserID, p.ID, PayoutFailed, transferID); err != nil {
			return err
		}
		bal, err := tx.LockBalance(ctx, p.UserID, p.Currency)
		if err != nil {
			return err
		}
		bal.Amount += p.Amount
		bal.Reserved -= p.Amount
		if err := tx.SetBalance(ctx, p.UserID, p.Currency, bal); err != nil {
			return err
		}
		return tx.InsertEntries(ctx, Entry{UserID: p.UserID, Currency: p.Currency, Amount: p.Amount, PayoutID: p.ID})
	})
	if err != nil {
		return Payout{}, fmt.Errorf("payments: refund payout: %w", err)
	}
	p.Status, p.BankTransferID, p.BankOutcomeCause = PayoutFailed, transferID, ""
	return p, nil
}

// GetPayout returns the user's payout id, or ErrNotFound (also for another
// user's payout, and for an id that is not a UUID).
func (s *Service) GetPayout(ctx context.Context, userID, id string) (Payout, error) {
	id, ok := canonicalID(id)
	if !ok {
		return Payout{}, ErrNotFound
	}
	return s.ledger.Payout(ctx, userID, id)
}

// PayoutByBankKey returns the user's payout sent with bankKey, or
// ErrNotFound.
func (s *Service) PayoutByBankKey(ctx context.Context, userID, bankKey string) (Payout, error) {
	return s.ledger.PayoutByBankKey(ctx, userID, bankKey)
}
