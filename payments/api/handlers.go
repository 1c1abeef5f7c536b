package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
)

// key returns the request's Idempotency-Key as the middleware parsed it
// ("abc" and "\"abc\"" are the same key), or "" outside the middleware.
// The movement keeps it as plain data for support; it decides nothing.
func (h *handlers) key(r *http.Request) string {
	return idem.KeyFromContext(r.Context())
}

// readBody reads the request's body into one buffer of its length (the
// middleware has set ContentLength to what it read), not the doubling
// buffers of io.ReadAll: bodies of up to 1 MiB are held while in flight.
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

func (h *handlers) createDeposit(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		h.fail(w, r, fmt.Errorf("read body: %w", err))
		return
	}
	var req payments.DepositRequest
	if err := decodeObject(body, currencyMember("currency", &req.Currency), amountMember("amount", &req.Amount)); err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.svc.Deposit(r.Context(), userOf(r), h.key(r), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/deposits/"+d.ID)
	writeJSON(w, http.StatusCreated, depositView(d))
}

func (h *handlers) createTransaction(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		h.fail(w, r, fmt.Errorf("read body: %w", err))
		return
	}
	var req payments.TransferRequest
	if err := decodeObject(body,
		currencyMember("source_currency", &req.SourceCurrency),
		currencyMember("target_currency", &req.TargetCurrency),
		amountMember("amount", &req.Amount)); err != nil {
		h.fail(w, r, err)
		return
	}
	t, err := h.svc.Convert(r.Context(), userOf(r), h.key(r), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/transactions/"+t.ID)
	writeJSON(w, http.StatusCreated, transactionView(t))
}

func (h *handlers) getDeposit(w http.ResponseWriter, r *http.Request) {
	d, err := h.svc.GetDeposit(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, depositView(d))
}

func (h *handlers) getTransaction(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.GetTransaction(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, transactionView(t))
}

func (h *handlers) balances(w http.ResponseWriter, r *http.Request) {
	bs, err := h.svc.Balances(r.Context(), userOf(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, balancesView(bs))
}

func (h *handlers) rates(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.svc.Rates().Spec())
}

func (h *handlers) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.svc.Ping(ctx); err != nil {
		h.log.ErrorContext(r.Context(), "health check", "err", err)
		writeProblem(w, ProblemUnavailable, http.StatusServiceUnavailable, "The database does not answer.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// fail answers a request with the problem err stands for. Business
// outcomes are 4xx, which the middleware stores and replays; anything else
// is a 500, which it does not, so a retry with the same key runs again.
func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		invalid *payments.ValidationError
		funds   *payments.InsufficientFundsError
		limit   *payments.BalanceLimitError
	)
	switch {
	case errors.As(err, &invalid):
		writeProblem(w, ProblemInvalidRequest, http.StatusBadRequest, invalidDetail(invalid), problemFields(invalid)...)
	case errors.As(err, &funds):
		writeProblem(w, ProblemInsufficientFunds, http.StatusPaymentRequired,
			fmt.Sprintf("The %s balance is %d; this transaction needs %d.", funds.Currency, funds.Balance, funds.Requested))
	case errors.As(err, &limit):
		detail := fmt.Sprintf("Crediting %d would take the %s balance of %d past its limit of %d.", limit.Credit, limit.Currency, limit.Balance, limit.Limit)
		if limit.Reserved > 0 {
			detail = fmt.Sprintf("Crediting %d would take the %s balance of %d, with the %d its pending payouts reserve for their refunds, past its limit of %d.",
				limit.Credit, limit.Currency, limit.Balance, limit.Reserved, limit.Limit)
		}
		writeProblem(w, ProblemBalanceLimit, http.StatusBadRequest, detail)
	case errors.Is(err, payments.ErrDuplicateTransfer):
		writeProblem(w, ProblemDuplicate, http.StatusConflict,
			"An identical transaction (same currencies and amount) was made in the same minute; nothing was moved. If you mean to repeat it, wait for the next minute.")
	case errors.Is(err, payments.ErrDuplicateDeposit):
		writeProblem(w, ProblemDuplicateDeposit, http.StatusConflict,
			"An identical deposit (same currency and amount) was made in the same minute; nothing was moved. If you mean to repeat it, wait for the next minute.")
	case errors.Is(err, payments.ErrDuplicate):
		writeProblem(w, ProblemDuplicate, http.StatusConflict, "A unique constraint refused this request as a duplicate; nothing was moved.")
	case errors.Is(err, payments.ErrNotFound):
		writeProblem(w, ProblemNotFound, http.StatusNotFound, "There is no such "+resourceName(r)+".")
	default:
		h.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeProblem(w, ProblemInternal, http.StatusInternalServerError, "Something went wrong; nothing was moved. Retry with the same "+h.keyHeader+".")
	}
}

func resourceName(r *http.Request) string {
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/deposits/"):
		return "deposit"
	case strings.HasPrefix(r.URL.Path, "/v1/payouts/"):
		return "payout"
	}
	return "transaction"
}

func invalidDetail(v *payments.ValidationError) string {
	parts := make([]string, len(v.Fields))
	for i, f := range v.Fields {
		if f.Field == "" {
			parts[i] = f.Detail
		} else {
			parts[i] = f.Field + " " + f.Detail
		}
	}
	if v.Unlisted > 0 {
		parts = append(parts, fmt.Sprintf("and %d more problems, not listed", v.Unlisted))
	}
	return "The request is invalid: " + strings.Join(parts, "; ") + "."
}

func problemFields(v *payments.ValidationError) []ProblemField {
	out := make([]ProblemField, len(v.Fields))
	for i, f := range v.Fields {
		out[i] = ProblemField{Pointer: pointer(f.Field), Detail: f.Detail}
	}
	return out
}

// pointer is the JSON Pointer, as a URI fragment, of a top-level member;
// "#" (the whole body) for "".
func pointer(member string) string {
	if member == "" {
		return "#"
	}
	p := strings.NewReplacer("~", "~0", "/", "~1").Replace(member)
	return "#/" + (&url.URL{Fragment: p}).EscapedFragment()
}
