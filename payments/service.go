package payments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/idem-dev/idem/payments/money"
)

// DefaultMaxBalance is Config.MaxBalance's default: 10^18 minor units, well
// inside int64, so no sum of balances can overflow.
const DefaultMaxBalance int64 = 1_000_000_000_000_000_000

// Config configures a Service. Its zero value is valid; every field
// documents its default.
type Config struct {
	// Rates are the supported currencies and their exchange rates.
	// Default money.DefaultTable().
	Rates *money.Table
	// MaxBalance is the most a balance may hold, in minor units; a credit
	// past it is refused with BalanceLimitError. Default DefaultMaxBalance.
	MaxBalance int64
}

// Service is the wallet: deposits, conversions, balances, users.
type Service struct {
	ledger     Ledger
	rates      *money.Table
	maxBalance int64
}

// New returns a Service on ledger. It fails on an invalid Config.
func New(ledger Ledger, cfg Config) (*Service, error) {
	if ledger == nil {
		return nil, errors.New("payments: New needs a Ledger")
	}
	if cfg.Rates == nil {
		cfg.Rates = money.DefaultTable()
	}
	switch {
	case cfg.MaxBalance == 0:
		cfg.MaxBalance = DefaultMaxBalance
	case cfg.MaxBalance < money.MaxAmount:
		return nil, fmt.Errorf("payments: MaxBalance %d is below the largest amount %d", cfg.MaxBalance, money.MaxAmount)
	}
	return &Service{ledger: ledger, rates: cfg.Rates, maxBalance: cfg.MaxBalance}, nil
}

// Rates returns the rate table in force.
func (s *Service) Rates() *money.Table { return s.rates }

// Deposit pays req.Amount into the user's req.Currency balance: one credit.
// key is the request's Idempotency-Key ("" for none), kept on the deposit
// row as plain data for support: it binds nothing.
func (s *Service) Deposit(ctx context.Context, userID, key string, req DepositRequest) (Deposit, error) {
	var v ValidationError
	s.checkCurrency(&v, "currency", req.Currency)
	checkAmount(&v, "amount", req.Amount)
	if err := v.Err(); err != nil {
		return Deposit{}, err
	}
	d := Deposit{ID: uuid.NewString(), UserID: userID, Currency: req.Currency, Amount: req.Amount}
	err := s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		// The row goes in first, so a net that fires leaves nothing to undo.
		created, inserted, err := tx.InsertDeposit(ctx, d, key)
		if err != nil {
			return err
		}
		if !inserted {
			return ErrDuplicateDeposit
		}
		d.CreatedAt = created
		bal, err := tx.LockBalance(ctx, userID, d.Currency)
		if err != nil {
			return err
		}
		if err := s.credit(ctx, tx, userID, d.Currency, bal, d.Amount); err != nil {
			return err
		}
		return tx.InsertEntries(ctx, Entry{UserID: userID, Currency: d.Currency, Amount: d.Amount, DepositID: d.ID})
	})
	if err != nil {
		return Deposit{}, err
	}
	return d, nil
}

// Quote validates a conversion and prices it without moving money: the
// transaction Convert would make, less its ID, user and time.
func (s *Service) Quote(req TransferRequest) (Transaction, error) {
	var v ValidationError
	s.checkCurrency(&v, "source_currency", req.SourceCurrency)
	s.checkCurrency(&v, "target_currency", req.TargetCurrency)
	checkAmount(&v, "amount", req.Amount)
	if req.SourceCurrency != "" && req.SourceCurrency == req.TargetCurrency {
		v.Add("target_currency", "must differ from source_currency")
	}
	if err := v.Err(); err != nil {
		return Transaction{}, err
	}
	from, _ := s.rates.Currency(req.SourceCurrency)
	to, _ := s.rates.Currency(req.TargetCurrency)
	rate, err := s.rates.Rate(from.Code, to.Code)
	if err != nil {
		return Transaction{}, err
	}
	converted, err := money.Convert(req.Amount, from, to, rate)
	switch {
	case err != nil || converted > money.MaxAmount:
		v.Add("amount", "converts to more than %d minor units of %s", money.MaxAmount, to.Code)
	case converted < 1:
		v.Add("amount", "converts to less than one minor unit of %s at rate %s", to.Code, rate)
	}
	if err := v.Err(); err != nil {
		return Transaction{}, err
	}
	return Transaction{
		SourceCurrency: from.Code, TargetCurrency: to.Code,
		Amount: req.Amount, ConvertedAmount: converted, Rate: rate.String(), Status: StatusCompleted,
	}, nil
}

// Convert moves req.Amount out of the user's source balance and its
// converted amount into the target balance, atomically: one debit and one
// credit. key is the request's Idempotency-Key ("" for none), kept on the
// transaction row as plain data for support: it binds nothing. The minute
// net refuses a second identical transaction in the same UTC minute with
// ErrDuplicateTransfer.
func (s *Service) Convert(ctx context.Context, userID, key string, req TransferRequest) (Transaction, error) {
	t, err := s.Quote(req)
	if err != nil {
		return Transaction{}, err
	}
	t.ID, t.UserID = uuid.NewString(), userID
	err = s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		// The row goes in first, so a net that fires leaves nothing to undo.
		created, inserted, err := tx.InsertTransaction(ctx, t, key)
		if err != nil {
			return err
		}
		if !inserted {
			return ErrDuplicateTransfer
		}
		t.CreatedAt = created
		// Lock both balances in one fixed order, by currency code, so two
		// transactions between the same balances in opposite directions
		// cannot deadlock.
		bal := make(map[string]Funds, 2)
		for _, c := range lockOrder(t.SourceCurrency, t.TargetCurrency) {
			if bal[c], err = tx.LockBalance(ctx, userID, c); err != nil {
				return err
			}
		}
		src := bal[t.SourceCurrency]
		if src.Amount < t.Amount {
			return &InsufficientFundsError{Currency: t.SourceCurrency, Balance: src.Amount, Requested: t.Amount}
		}
		src.Amount -= t.Amount
		if err := tx.SetBalance(ctx, userID, t.SourceCurrency, src); err != nil {
			return err
		}
		if err := s.credit(ctx, tx, userID, t.TargetCurrency, bal[t.TargetCurrency], t.ConvertedAmount); err != nil {
			return err
		}
		return tx.InsertEntries(ctx,
			Entry{UserID: userID, Currency: t.SourceCurrency, Amount: -t.Amount, TransactionID: t.ID},
			Entry{UserID: userID, Currency: t.TargetCurrency, Amount: t.ConvertedAmount, TransactionID: t.ID})
	})
	if err != nil {
		return Transaction{}, err
	}
	return t, nil
}

// lockOrder returns the currencies in the order their balances are locked.
func lockOrder(currencies ...string) []string {
	out := slices.Clone(currencies)
	slices.Sort(out)
	return slices.Compact(out)
}

// credit adds amount to a locked balance, within MaxBalance less what
// pending payouts reserve for their refunds.
func (s *Service) credit(ctx context.Context, tx LedgerTx, userID, currency string, f Funds, amount int64) error {
	if f.Amount > s.maxBalance-f.Reserved-amount {
		return &BalanceLimitError{Currency: currency, Balance: f.Amount, Reserved: f.Reserved, Credit: amount, Limit: s.maxBalance}
	}
	f.Amount += amount
	return tx.SetBalance(ctx, userID, currency, f)
}

func (s *Service) checkCurrency(v *ValidationError, field, code string) {
	switch {
	case code == "":
		v.Add(field, "is required")
	case !money.ValidCode(code):
		v.Add(field, "%s is not a currency code (three upper-case letters, such as USD)", echo(code))
	default:
		if _, ok := s.rates.Currency(code); !ok {
			v.Add(field, "%s is not supported; supported: %s", code, strings.Join(s.rates.Codes(), ", "))
		}
	}
}

func checkAmount(v *ValidationError, field string, amount int64) {
	if amount < 1 || amount > money.MaxAmount {
		v.Add(field, "must be an integer from 1 to %d (minor units)", money.MaxAmount)
	}
}

// GetDeposit returns the user's deposit id, or ErrNotFound (also for another
// user's deposit, and for an id that is not a UUID).
func (s *Service) GetDeposit(ctx context.Context, userID, id string) (Deposit, error) {
	id, ok := canonicalID(id)
	if !ok {
		return Deposit{}, ErrNotFound
	}
	return s.ledger.Deposit(ctx, userID, id)
}

// GetTransaction returns the user's transaction id, or ErrNotFound (also
// for another user's transaction, and for an id that is not a UUID).
func (s *Service) GetTransaction(ctx context.Context, userID, id string) (Transaction, error) {
	id, ok := canonicalID(id)
	if !ok {
		return Transaction{}, ErrNotFound
	}
	return s.ledger.Transaction(ctx, userID, id)
}

// Entries returns the ledger entries the user's deposit, transaction or
// payout id wrote, in the order they were written: none for an id the user
// has no movement of (also for another user's, and for an id that is not a
// UUID).
func (s *Service) Entries(ctx context.Context, userID string, m Movement, id string) ([]Entry, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("payments: entries: unknown movement %q", m)
	}
	id, ok := canonicalID(id)
	if !ok {
		return nil, nil
	}
	return s.ledger.Entries(ctx, userID, m, id)
}

// canonicalID returns a UUID in its lower-case hyphenated form.
func canonicalID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", false
	}
	return u.String(), true
}

// Balances returns the user's balances, ordered by currency. A currency the
// user has held stays listed at zero.
func (s *Service) Balances(ctx context.Context, userID string) ([]Balance, error) {
	return s.ledger.Balances(ctx, userID)
}

// Reconcile checks that every balance row of the user equals the sum of
// its ledger entries.
func (s *Service) Reconcile(ctx context.Context, userID string) error {
	rows, err := s.ledger.Balances(ctx, userID)
	if err != nil {
		return err
	}
	sums, err := s.ledger.EntryTotals(ctx, userID)
	if err != nil {
		return err
	}
	want := map[string]int64{}
	for _, b := range sums {
		want[b.Currency] = b.Amount
	}
	var errs []error
	for _, b := range rows {
		if want[b.Currency] != b.Amount {
			errs = append(errs, fmt.Errorf("payments: user %s: %s balance is %d, its entries sum to %d", userID, b.Currency, b.Amount, want[b.Currency]))
		}
		delete(want, b.Currency)
	}
	for c, sum := range want {
		errs = append(errs, fmt.Errorf("payments: user %s: %s entries sum to %d with no balance row", userID, c, sum))
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers.
func (s *Service) Ping(ctx context.Context) error { return s.ledger.Ping(ctx) }
