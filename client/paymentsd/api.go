package paymentsd

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idem-dev/idem/client"
)

// DepositParams asks for a deposit.
type DepositParams struct {
	Currency string `json:"currency"` // an ISO 4217 code of the rate table, such as "USD"
	Amount   int64  `json:"amount"`   // minor units (cents; whole yen), 1 or more
	// IdempotencyKey makes a later call with the same key and parameters get
	// this deposit instead of a second one. Default a new key per call
	// (which the call's own retries keep); set it to retry beyond one call,
	// such as after a restart, and read it back from Deposit.Response.Key.
	IdempotencyKey string `json:"-"`
}

// Deposit is a deposit made.
type Deposit struct {
	ID        string    `json:"id"`
	Currency  string    `json:"currency"`
	Amount    int64     `json:"amount"`
	CreatedAt time.Time `json:"created_at"`
	Response  Response  `json:"-"`
}

// TransactionParams asks for a conversion between two of the user's
// balances.
type TransactionParams struct {
	SourceCurrency string `json:"source_currency"`
	TargetCurrency string `json:"target_currency"`
	Amount         int64  `json:"amount"` // minor units of the source currency
	// IdempotencyKey: as DepositParams.IdempotencyKey.
	IdempotencyKey string `json:"-"`
}

// Transaction is a conversion made.
type Transaction struct {
	ID              string    `json:"id"`
	SourceCurrency  string    `json:"source_currency"`
	TargetCurrency  string    `json:"target_currency"`
	Amount          int64     `json:"amount"`
	ConvertedAmount int64     `json:"converted_amount"` // minor units of the target currency
	Rate            string    `json:"rate"`             // the rate applied, a decimal string
	Status          string    `json:"status"`
	CreatedAt       time.Time `json:"created_at"`
	Response        Response  `json:"-"`
}

// PayoutParams asks for a payout to a bank account.
type PayoutParams struct {
	Currency    string `json:"currency"`
	Amount      int64  `json:"amount"`      // minor units, 1 or more
	Destination string `json:"destination"` // the bank account
	// IdempotencyKey: as DepositParams.IdempotencyKey. A payout still
	// pending is finished by a later call with the same key (or by the
	// server's completer): keep it to ask again.
	IdempotencyKey string `json:"-"`
}

// Payout is a payout made, or on its way.
type Payout struct {
	ID             string    `json:"id"`
	Currency       string    `json:"currency"`
	Amount         int64     `json:"amount"`
	Destination    string    `json:"destination"`
	Status         string    `json:"status"`           // PayoutPending, PayoutPaid or PayoutFailed
	BankTransferID string    `json:"bank_transfer_id"` // "" until the bank recorded the transfer
	CreatedAt      time.Time `json:"created_at"`
	Response       Response  `json:"-"`
}

// The statuses of a Payout.
const (
	// PayoutPending: debited, the bank's outcome not known yet (202). The
	// answer is not stored: call CreatePayout again with the same key, or
	// read the payout later; it is never paid twice.
	PayoutPending = "pending"
	PayoutPaid    = "paid"   // the bank settled it
	PayoutFailed  = "failed" // the bank rejected it; the debit was refunded
)

// Balance is one of the user's balances.
type Balance struct {
	Currency string `json:"currency"`
	Amount   int64  `json:"amount"` // minor units
}

// Rates is the rate table: units of each currency per one major unit of the
// base currency, as decimal strings, and each currency's decimals.
type Rates struct {
	Base     string            `json:"base"`
	Rates    map[string]string `json:"rates"`
	Decimals map[string]int    `json:"decimals"`
}

// CreateDeposit makes a deposit (POST /v1/deposits). On an error the
// Deposit holds only its Response: the key to retry with, and the status.
func (c *Client) CreateDeposit(ctx context.Context, p DepositParams) (*Deposit, error) {
	var d Deposit
	r, err := c.call(ctx, http.MethodPost, "/v1/deposits", keyOr(p.IdempotencyKey), p, &d)
	d.Response = r
	return &d, err
}

// CreateTransaction converts money between two balances
// (POST /v1/transactions). On an error the Transaction holds only its
// Response, as CreateDeposit's.
func (c *Client) CreateTransaction(ctx context.Context, p TransactionParams) (*Transaction, error) {
	var t Transaction
	r, err := c.call(ctx, http.MethodPost, "/v1/transactions", keyOr(p.IdempotencyKey), p, &t)
	t.Response = r
	return &t, err
}

// CreatePayout pays money out to a bank account (POST /v1/payouts). A
// payout whose bank outcome is unknown comes back with status
// PayoutPending and Response.Status 202, and no error. On an error the
// Payout holds only its Response, as CreateDeposit's.
func (c *Client) CreatePayout(ctx context.Context, p PayoutParams) (*Payout, error) {
	var out Payout
	r, err := c.call(ctx, http.MethodPost, "/v1/payouts", keyOr(p.IdempotencyKey), p, &out)
	out.Response = r
	return &out, err
}

// Payout reads a payout (GET /v1/payouts/{id}).
func (c *Client) Payout(ctx context.Context, id string) (*Payout, error) {
	var out Payout
	r, err := c.call(ctx, http.MethodGet, "/v1/payouts/"+url.PathEscape(id), "", nil, &out)
	out.Response = r
	return &out, err
}

// Deposit reads a deposit (GET /v1/deposits/{id}).
func (c *Client) Deposit(ctx context.Context, id string) (*Deposit, error) {
	var d Deposit
	r, err := c.call(ctx, http.MethodGet, "/v1/deposits/"+url.PathEscape(id), "", nil, &d)
	d.Response = r
	return &d, err
}

// Transaction reads a transaction (GET /v1/transactions/{id}).
func (c *Client) Transaction(ctx context.Context, id string) (*Transaction, error) {
	var t Transaction
	r, err := c.call(ctx, http.MethodGet, "/v1/transactions/"+url.PathEscape(id), "", nil, &t)
	t.Response = r
	return &t, err
}

// Balances reads the user's balances (GET /v1/balances).
func (c *Client) Balances(ctx context.Context) ([]Balance, error) {
	var v struct {
		Balances []Balance `json:"balances"`
	}
	_, err := c.call(ctx, http.MethodGet, "/v1/balances", "", nil, &v)
	return v.Balances, err
}

// Rates reads the rate table (GET /v1/rates).
func (c *Client) Rates(ctx context.Context) (*Rates, error) {
	var v Rates
	_, err := c.call(ctx, http.MethodGet, "/v1/rates", "", nil, &v)
	return &v, err
}

// The names of paymentsd's problem types that a caller may act on
// (docs/problems.md lists them all).
const (
	ProblemInsufficientFunds  = "insufficient-funds"    // 402: the source balance is too small
	ProblemInvalidRequest     = "invalid-request"       // 400: the Problem's Body lists each member's error
	ProblemBalanceLimit       = "balance-limit"         // 400: a credit would pass the balance limit
	ProblemDuplicate          = "duplicate-transaction" // 409: a business net refused a duplicate
	ProblemDuplicateDeposit   = "duplicate-deposit"     // 409: the deposits' minute net refused a duplicate
	ProblemPayoutsUnavailable = "payouts-unavailable"   // 503: the server has no bank (--bank-url)
	ProblemKeyReused          = "key-reused"            // 422: the key was used for other parameters
	ProblemUnauthorized       = "unauthorized"          // 401: the API key is unknown
	ProblemNotFound           = "not-found"             // 404
)

// ProblemName returns the name of err's problem type (the part after '#'),
// or "" when err is not a *client.Problem of that form.
func ProblemName(err error) string {
	var p *client.Problem
	if !errors.As(err, &p) {
		return ""
	}
	_, name, _ := strings.Cut(p.Type, "#")
	return name
}
