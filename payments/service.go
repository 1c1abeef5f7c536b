package payments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments/money"
)

// DefaultMaxBalance is Config.MaxBalance's default: 10^18 minor units, well
// inside int64, so no sum of balances can overflow.
const DefaultMaxBalance int64 = 1_000_000_000_000_000_000

// DefaultReleaseBatch is how many keys ReleaseExpiredKeys clears per
// statement.
const DefaultReleaseBatch = 1000

// Config configures a Service. Its zero value is valid; every field
// documents its default.
type Config struct {
	// Rates are the supported currencies and their exchange rates.
	// Default money.DefaultTable().
	Rates *money.Table
	// MaxBalance is the most a balance may hold, in minor units; a credit
	// past it is refused with BalanceLimitError. Default DefaultMaxBalance.
	MaxBalance int64
	// KeyRetention is how long an Idempotency-Key binds the movement it
	// made (the idem middleware's TTL). A movement older than that, whose
	// key a new request has taken afresh, gives its key up inline (see
	// LedgerTx.ReleaseStaleKey), so a key past retention is free whether or
	// not the sweeper has released it yet. Zero: only the sweeper (and
	// ReleaseExpiredKeys) release keys.
	KeyRetention time.Duration
}

// Service is the wallet: deposits, conversions, balances, users.
type Service struct {
	ledger     Ledger
	rates      *money.Table
	maxBalance int64
	retention  time.Duration
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
	if cfg.KeyRetention < 0 {
		return nil, fmt.Errorf("payments: KeyRetention %v is negative", cfg.KeyRetention)
	}
	return &Service{ledger: ledger, rates: cfg.Rates, maxBalance: cfg.MaxBalance, retention: cfg.KeyRetention}, nil
}

// Rates returns the rate table in force.
func (s *Service) Rates() *money.Table { return s.rates }

// Deposit pays req.Amount into the user's req.Currency balance: one credit.
// key is the request's Idempotency-Key ("" for none), kept on the deposit
// row as the key net.
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
		created, err := s.insertMovement(ctx, tx, KindDeposit, userID, key, func() (time.Time, bool, error) {
			return tx.InsertDeposit(ctx, d, key)
		})
		if err != nil {
			return err
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
// transaction row as the key net.
func (s *Service) Convert(ctx context.Context, userID, key string, req TransferRequest) (Transaction, error) {
	t, err := s.Quote(req)
	if err != nil {
		return Transaction{}, err
	}
	t.ID, t.UserID = uuid.NewString(), userID
	err = s.ledger.Atomic(ctx, func(tx LedgerTx) error {
		// The row goes in first, so a net that fires leaves nothing to undo.
		created, err := s.insertMovement(ctx, tx, KindTransaction, userID, key, func() (time.Time, bool, error) {
			return tx.InsertTransaction(ctx, t, key)
		})
		if err != nil {
			return err
		}
		t.CreatedAt = created
		// Lock both balances in one fixed order, by currency code, so two
		// transactions between the same balances in opposite directions
		// cannot deadlock.
		bal := make(map[string]int64, 2)
		for _, c := range lockOrder(t.SourceCurrency, t.TargetCurrency) {
			if bal[c], err = tx.LockBalance(ctx, userID, c); err != nil {
				return err
			}
		}
		if bal[t.SourceCurrency] < t.Amount {
			return &InsufficientFundsError{Currency: t.SourceCurrency, Balance: bal[t.SourceCurrency], Requested: t.Amount}
		}
		if err := tx.SetBalance(ctx, userID, t.SourceCurrency, bal[t.SourceCurrency]-t.Amount); err != nil {
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

// insertMovement stores a movement with insert and returns its creation
// time, or the error of the net that refused it. A key net that fires on a
// stale binding (a movement older than the key retention, made before the
// key's current idempotency record: the record expired and this request
// took the key afresh before the sweeper released it) is released and the
// movement inserted again, once.
func (s *Service) insertMovement(ctx context.Context, tx LedgerTx, kind Kind, userID, key string, insert func() (time.Time, bool, error)) (time.Time, error) {
	created, inserted, err := insert()
	if err == nil && !inserted && key != "" && s.retention > 0 {
		var released bool
		if released, err = tx.ReleaseStaleKey(ctx, kind, userID, key, s.retention); released {
			created, inserted, err = insert()
		}
	}
	switch {
	case err != nil:
		return time.Time{}, err
	case !inserted:
		return time.Time{}, whichNet(ctx, tx, kind, userID, key)
	}
	return created, nil
}

// whichNet says which net refused a movement: the key net when the key is
// already bound, else the kind's minute net.
func whichNet(ctx context.Context, tx LedgerTx, kind Kind, userID, key string) error {
	if key != "" {
		bound, err := tx.KeyBound(ctx, kind, userID, key)
		if err != nil {
			return err
		}
		if bound {
			return ErrDuplicateKey
		}
	}
	if kind == KindDeposit {
		return ErrDuplicateDeposit
	}
	return ErrDuplicateTransfer
}

// lockOrder returns the currencies in the order their balances are locked.
func lockOrder(currencies ...string) []string {
	out := slices.Clone(currencies)
	slices.Sort(out)
	return slices.Compact(out)
}

// credit adds amount to a locked balance, within MaxBalance.
func (s *Service) credit(ctx context.Context, tx LedgerTx, userID, currency string, balance, amount int64) error {
	if balance > s.maxBalance-amount {
		return &BalanceLimitError{Currency: currency, Balance: balance, Credit: amount, Limit: s.maxBalance}
	}
	return tx.SetBalance(ctx, userID, currency, balance+amount)
}

func (s *Service) checkCurrency(v *ValidationError, field, code string) {
	switch {
	case code == "":
		v.Add(field, "is required")
	case !money.ValidCode(code):
		v.Add(field, "%q is not a currency code (three upper-case letters, such as USD)", code)
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

// ReleaseKeys frees the Idempotency-Keys of the deposits and transactions
// whose key records the idem sweeper has just deleted, so the key net binds
// a key for exactly as long as its record lives. It is the sweeper's
// in-transaction hook:
//
//	sweeper.New(store, sweeper.Config{OnDeleteFunc: svc.ReleaseKeys})
//
// There ctx carries the sweep's transaction, so the keys are freed with
// the records or not at all.
func (s *Service) ReleaseKeys(ctx context.Context, deleted []idem.KeyRef) error {
	if len(deleted) == 0 {
		return nil
	}
	_, err := s.ledger.ReleaseKeys(ctx, deleted)
	return err
}

// ReleaseExpiredKeys frees the Idempotency-Keys of all deposits and
// transactions whose key record has expired or is gone: the catch-up for
// ReleaseKeys, for a database swept without the hook (or not swept). It is
// safe to run at any time, from any number of replicas, and returns how many
// keys it freed.
func (s *Service) ReleaseExpiredKeys(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := s.ledger.ReleaseExpiredKeys(ctx, DefaultReleaseBatch)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// Ping checks that the database answers.
func (s *Service) Ping(ctx context.Context) error { return s.ledger.Ping(ctx) }
