package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/idem-dev/idem/payments"
)

// timeLayout is RFC 3339 in UTC with microseconds, always the same width.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// DepositView is a deposit as the API shows it.
type DepositView struct {
	ID        string `json:"id"`
	Currency  string `json:"currency"`
	Amount    int64  `json:"amount"`
	CreatedAt string `json:"created_at"`
}

func depositView(d payments.Deposit) DepositView {
	return DepositView{ID: d.ID, Currency: d.Currency, Amount: d.Amount, CreatedAt: formatTime(d.CreatedAt)}
}

// TransactionView is a transaction as the API shows it.
type TransactionView struct {
	ID              string `json:"id"`
	SourceCurrency  string `json:"source_currency"`
	TargetCurrency  string `json:"target_currency"`
	Amount          int64  `json:"amount"`
	ConvertedAmount int64  `json:"converted_amount"`
	Rate            string `json:"rate"`
	Status          string `json:"status"`
	CreatedAt       string `json:"created_at"`
}

func transactionView(t payments.Transaction) TransactionView {
	return TransactionView{
		ID: t.ID, SourceCurrency: t.SourceCurrency, TargetCurrency: t.TargetCurrency,
		Amount: t.Amount, ConvertedAmount: t.ConvertedAmount, Rate: t.Rate,
		Status: string(t.Status), CreatedAt: formatTime(t.CreatedAt),
	}
}

// BalanceView is one balance as the API shows it.
type BalanceView struct {
	Currency string `json:"currency"`
	Amount   int64  `json:"amount"`
}

// BalancesView is the body of GET /v1/balances.
type BalancesView struct {
	Balances []BalanceView `json:"balances"`
}

func balancesView(bs []payments.Balance) BalancesView {
	v := BalancesView{Balances: make([]BalanceView, len(bs))}
	for i, b := range bs {
		v.Balances[i] = BalanceView(b)
	}
	return v
}

// writeJSON sends v as a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) { write(w, status, "application/json", v) }

// write sends v as JSON, without escaping <, > and & (the body is never
// HTML), followed by a newline.
func write(w http.ResponseWriter, status int, contentType string, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("api: marshal response: " + err.Error()) // the views always marshal
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
