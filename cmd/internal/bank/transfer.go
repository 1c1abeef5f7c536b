package bank

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// MaxRequestBytes bounds a transfer request's body; a larger one is
// answered 413.
const MaxRequestBytes = 64 << 10

// RejectPrefix marks a destination the bank refuses: a transfer to it is
// recorded as rejected, a final answer, and no money moves.
const RejectPrefix = "reject-"

// Transfer statuses.
const (
	StatusSettled  = "settled"
	StatusRejected = "rejected"
)

// Request is a validated transfer request. Amount is in the currency's
// minor units.
type Request struct {
	Amount      int64
	Currency    string
	Destination string
}

// Transfer is a transfer as the bank shows it, in POST answers and GETs.
type Transfer struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Destination    string `json:"destination"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
}

// errBadRequest marks a request the bank refuses before doing anything.
var errBadRequest = errors.New("invalid transfer request")

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// decodeRequest reads and validates a transfer request body: a JSON object
// with exactly amount (a positive integer, never a fraction or a string),
// currency (three capital letters) and destination (1 to 255 bytes).
func decodeRequest(body io.Reader) (Request, error) {
	var in struct {
		Amount      json.RawMessage `json:"amount"`
		Currency    *string         `json:"currency"`
		Destination *string         `json:"destination"`
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Request{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Request{}, fmt.Errorf("%w: data after the JSON object", errBadRequest)
	}
	var req Request
	switch {
	case in.Amount == nil:
		return req, fmt.Errorf("%w: amount is required", errBadRequest)
	case in.Currency == nil:
		return req, fmt.Errorf("%w: currency is required", errBadRequest)
	case in.Destination == nil:
		return req, fmt.Errorf("%w: destination is required", errBadRequest)
	}
	amount, err := strconv.ParseInt(string(in.Amount), 10, 64)
	if err != nil || amount <= 0 {
		return req, fmt.Errorf("%w: amount must be a positive integer of minor units, got %s", errBadRequest, in.Amount)
	}
	if !currencyCode.MatchString(*in.Currency) {
		return req, fmt.Errorf("%w: currency must be three capital letters (ISO 4217), got %q", errBadRequest, *in.Currency)
	}
	if d := *in.Destination; d == "" || len(d) > 255 || strings.TrimSpace(d) != d {
		return req, fmt.Errorf("%w: destination must be 1 to 255 bytes without surrounding spaces", errBadRequest)
	}
	return Request{Amount: amount, Currency: *in.Currency, Destination: *in.Destination}, nil
}

// fingerprint identifies what a request asks for, whatever its JSON
// spelling: the same key with another fingerprint is another request.
func (r Request) fingerprint() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "bank-transfer-v1\x00%d\x00%s\x00%s", r.Amount, r.Currency, r.Destination)
	sum := sha256.Sum256(b.Bytes())
	return sum[:]
}

func (r Request) rejected() bool { return strings.HasPrefix(r.Destination, RejectPrefix) }
