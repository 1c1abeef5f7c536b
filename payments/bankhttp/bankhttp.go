// Package bankhttp is the client of the bank's HTTP API (cmd/bankd's
// protocol, docs/bankd.md): payments.Bank over net/http.
package bankhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
)

// DefaultTimeout bounds one call to the bank unless Config.Timeout says
// otherwise.
const DefaultTimeout = 10 * time.Second

// Config configures a Client.
type Config struct {
	// URL is the bank's base URL, such as http://127.0.0.1:8090. Required.
	URL string
	// Timeout bounds one call. A call that runs out is an unknown
	// outcome, never a failure. Default DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the calls. Default: a client of its own.
	HTTPClient *http.Client
}

// Client calls the bank.
type Client struct {
	base    *url.URL
	timeout time.Duration
	http    *http.Client
}

var _ payments.Bank = (*Client)(nil)

// New returns a Client. It fails on an invalid Config.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bankhttp: the bank URL %q is not an http(s) URL", cfg.URL)
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("bankhttp: Timeout must be positive, got %v", cfg.Timeout)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	return &Client{base: u, timeout: cfg.Timeout, http: cfg.HTTPClient}, nil
}

// transfer is the bank's transfer, as much of it as a payout needs.
type transfer struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// outcome is what a transfer the bank recorded says.
func (t transfer) outcome() payments.BankOutcome {
	switch t.Status {
	case "settled":
		return payments.BankOutcome{Status: payments.BankSettled, TransferID: t.ID}
	case "rejected":
		return payments.BankOutcome{Status: payments.BankRejected, TransferID: t.ID}
	}
	return unknown(payments.CauseBankError, fmt.Errorf("bankhttp: transfer %s has status %q", t.ID, t.Status))
}

// unknown is an outcome unknown for cause (payments.BankOutcome.Cause).
func unknown(cause string, err error) payments.BankOutcome {
	return payments.BankOutcome{Status: payments.BankUnknown, Err: err, Cause: cause}
}

// Send posts the transfer with key. Only a recorded transfer (201
// settled, 422 rejected) is an outcome; anything else, a 422 key-reused
// included, is unknown: never a reason to refund.
func (c *Client) Send(ctx context.Context, key string, p payments.Payout) payments.BankOutcome {
	body, err := json.Marshal(struct {
		Amount      int64  `json:"amount"`
		Currency    string `json:"currency"`
		Destination string `json:"destination"`
	}{p.Amount, p.Currency, p.Destination})
	if err != nil {
		return unknown(idem.CauseNoAnswer, fmt.Errorf("bankhttp: encode transfer: %w", err))
	}
	status, b, out := c.do(ctx, http.MethodPost, c.base.JoinPath("/v1/transfers").String(), key, body)
	if out != nil {
		return *out
	}
	var t transfer
	if status != http.StatusCreated && status != http.StatusUnprocessableEntity {
		return unknown(payments.CauseBankError, fmt.Errorf("bankhttp: send transfer: status %d", status))
	}
	if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
		return unknown(payments.CauseCutAnswer, fmt.Errorf("bankhttp: send transfer: status %d without a transfer", status))
	}
	return t.outcome()
}

// Find asks the bank for the transfer recorded under key.
func (c *Client) Find(ctx context.Context, key string) payments.BankOutcome {
	u := c.base.JoinPath("/v1/transfers")
	u.RawQuery = url.Values{"idempotency_key": {key}}.Encode()
	status, b, out := c.do(ctx, http.MethodGet, u.String(), "", nil)
	if out != nil {
		return *out
	}
	if status != http.StatusOK {
		return unknown(payments.CauseBankError, fmt.Errorf("bankhttp: find transfer: status %d", status))
	}
	var list struct {
		Transfers []transfer `json:"transfers"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return unknown(payments.CauseCutAnswer, fmt.Errorf("bankhttp: find transfer: %w", err))
	}
	switch len(list.Transfers) {
	case 0:
		return payments.BankOutcome{Status: payments.BankNotFound}
	case 1:
		return list.Transfers[0].outcome()
	}
	return unknown(payments.CauseBankError, errors.New("bankhttp: find transfer: more than one transfer under one key"))
}

// do makes one call and returns its status and answer, or, when it got
// none, the unknown outcome that says why.
func (c *Client) do(ctx context.Context, method, u, key string, body []byte) (int, []byte, *payments.BankOutcome) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	fail := func(cause string, err error) (int, []byte, *payments.BankOutcome) {
		out := unknown(cause, err)
		return 0, nil, &out
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return fail(idem.CauseNoAnswer, fmt.Errorf("bankhttp: %w", err))
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fail(idem.UnknownCause(err), fmt.Errorf("bankhttp: %s %s: %w", method, strings.SplitN(u, "?", 2)[0], err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		// The status came and its answer did not: cut, whatever cut it.
		return fail(payments.CauseCutAnswer, fmt.Errorf("bankhttp: read answer: %w", err))
	}
	return resp.StatusCode, b, nil
}
