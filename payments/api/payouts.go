package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/store"
)

// bankProvider names the bank in the derived key (idem.ProviderKey).
const bankProvider = "bank"

// PayoutView is a payout as the API shows it. BankTransferID is null
// until the bank recorded the transfer.
type PayoutView struct {
	ID             string  `json:"id"`
	Currency       string  `json:"currency"`
	Amount         int64   `json:"amount"`
	Destination    string  `json:"destination"`
	Status         string  `json:"status"`
	BankTransferID *string `json:"bank_transfer_id"`
	CreatedAt      string  `json:"created_at"`
}

func payoutView(p payments.Payout) PayoutView {
	v := PayoutView{
		ID: p.ID, Currency: p.Currency, Amount: p.Amount, Destination: p.Destination,
		Status: string(p.Status), CreatedAt: formatTime(p.CreatedAt),
	}
	if p.BankTransferID != "" {
		v.BankTransferID = &p.BankTransferID
	}
	return v
}

// stringMember reads a JSON string into dst.
func stringMember(name string, dst *string) member {
	return member{name, func(raw json.RawMessage) string {
		if err := json.Unmarshal(raw, dst); err != nil || string(raw) == "null" {
			return "must be a string"
		}
		return ""
	}}
}

func (h *handlers) createPayout(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		h.fail(w, r, fmt.Errorf("read body: %w", err))
		return
	}
	var req payments.PayoutRequest
	if err := decodeObject(body, currencyMember("currency", &req.Currency), amountMember("amount", &req.Amount),
		stringMember("destination", &req.Destination)); err != nil {
		h.fail(w, r, err)
		return
	}
	h.payout(r.Context(), w, r, userOf(r), h.key(r), &req)
}

func (h *handlers) getPayout(w http.ResponseWriter, r *http.Request) {
	p, err := h.svc.GetPayout(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, payoutView(p))
}

// payout runs a payout in two phases, as model/payout.pml's Client does,
// from wherever its key's record stands: a new request (req set) or a
// resumed one (a retry, or the completer with req nil).
//
//   - Phase A (idem.Advance to idem.PointOutcomeUnknown): the debit and the
//     pending payout commit with the recovery point, before the bank is
//     called with the derived key (idem.ProviderKey).
//   - Resuming at PointOutcomeUnknown: the bank is asked by the same key;
//     a bank that knows no transfer of it is sent it again, with the same
//     key: never a fresh key, never a refund (rules 1 and 2).
//   - Phase B, in the request's own transaction, which commits with the
//     key's completion: paid, or failed and refunded on the bank's
//     definitive rejection. With no answer, the payout stays pending: 202,
//     not stored (idem.Pending), resumed by a retry or the completer; why
//     the outcome is unknown (payments.BankOutcome.Cause) is recorded on
//     the payout in a phase of its own, for the operator.
func (h *handlers) payout(ctx context.Context, w http.ResponseWriter, r *http.Request, userID, key string, req *payments.PayoutRequest) {
	if h.bank == nil {
		writeProblem(w, ProblemPayoutsUnavailable, http.StatusServiceUnavailable,
			"This server has no bank to pay through; it was started without --bank-url. Nothing was moved.")
		return
	}
	point, err := idem.RecoveryPoint(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	bankKey, err := idem.ProviderKey(ctx, bankProvider)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var (
		p   payments.Payout
		out payments.BankOutcome
	)
	switch {
	case point == "" && req != nil:
		err := idem.Advance(ctx, idem.PointOutcomeUnknown, func(ctx context.Context) (err error) {
			p, err = h.svc.DebitPayout(ctx, userID, key, bankKey, *req)
			return err
		})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out = h.bank.Send(ctx, bankKey, p)
	case point == idem.PointOutcomeUnknown:
		if p, err = h.svc.PayoutByBankKey(ctx, userID, bankKey); err != nil {
			// %v, not %w: never a final 404, which would be stored and
			// leave a debited payout pending for ever; a 500 is retried.
			h.fail(w, r, fmt.Errorf("resume payout: %v", err))
			return
		}
		if out = h.bank.Find(ctx, bankKey); out.Status == payments.BankNotFound {
			out = h.bank.Send(ctx, bankKey, p)
		}
	default:
		h.fail(w, r, fmt.Errorf("resume payout: recovery point %q", point))
		return
	}
	switch out.Status {
	case payments.BankSettled:
		p, err = h.svc.SettlePayout(ctx, p, out.TransferID)
	case payments.BankRejected:
		p, err = h.svc.RefundPayout(ctx, p, out.TransferID)
	default:
		h.log.WarnContext(ctx, "payout outcome unknown", "payout_id", p.ID, "cause", out.Cause, "err", out.Err)
		// The cause commits in a phase of its own: Pending rolls the
		// request's transaction back. It is for the operator, so failing
		// to record it changes nothing the client is told.
		err := idem.Advance(ctx, idem.PointOutcomeUnknown, func(ctx context.Context) error {
			return h.svc.MarkPayoutUnknown(ctx, p, out.Cause)
		})
		if err != nil {
			h.log.WarnContext(ctx, "payout outcome unknown: cause not recorded", "payout_id", p.ID, "err", err)
		}
		if err := idem.Pending(ctx); err != nil {
			h.fail(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/payouts/"+p.ID)
		writeJSON(w, http.StatusAccepted, payoutView(p))
		return
	}
	if err != nil {
		// %v, not %w: the bank's outcome is known and must be recorded, so
		// a business error here is never a final 4xx, which would be stored
		// and leave the payout pending for ever; a 500 is retried.
		h.fail(w, r, fmt.Errorf("finish payout: %v", err))
		return
	}
	w.Header().Set("Location", "/v1/payouts/"+p.ID)
	writeJSON(w, http.StatusCreated, payoutView(p))
}

// PayoutResume returns the function a completer (package completer) runs
// to finish a payout that its request abandoned: the same payout handler,
// resuming at the record's recovery point. cfg is the API's.
func PayoutResume(cfg Config) (completer.Resume, error) {
	h, err := newHandlers(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, u store.Unfinished) idem.Response {
		w := &replyWriter{header: http.Header{}}
		r, err := http.NewRequestWithContext(ctx, u.Fingerprint.Method, u.Fingerprint.Path, http.NoBody)
		if err != nil {
			return idem.Response{StatusCode: http.StatusInternalServerError}
		}
		h.payout(ctx, w, r, u.Scope, u.Key, nil)
		return w.reply()
	}, nil
}
