package bank

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultSlowDelay is how late a slow-after fault answers unless
// Config.SlowDelay says otherwise: longer than any sane client timeout.
const DefaultSlowDelay = 60 * time.Second

// ProblemTypeBase prefixes the type URI of the bank's problem responses.
const ProblemTypeBase = "https://github.com/idem-dev/idem/blob/main/docs/bankd.md#"

// Config configures a Handler. The zero value injects no faults.
type Config struct {
	// Faults are the probabilities of each fault per transfer request.
	// Default: none.
	Faults Faults
	// Seed seeds the fault draws. Default 0.
	Seed uint64
	// SlowDelay is how long a slow-after fault holds its answer. Default
	// DefaultSlowDelay.
	SlowDelay time.Duration
	// Logger receives one line per injected fault and per store error,
	// never a body. Default: discard.
	Logger *slog.Logger
}

// Handler serves the bank's HTTP API (docs/bankd.md).
type Handler struct {
	store     *Store
	dice      *Dice
	slowDelay time.Duration
	logger    *slog.Logger
	mux       *http.ServeMux
	stopping  chan struct{} // closed by Stop
	stopOnce  sync.Once
}

// NewHandler returns the bank's API over store.
func NewHandler(store *Store, cfg Config) *Handler {
	if cfg.SlowDelay <= 0 {
		cfg.SlowDelay = DefaultSlowDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{
		store:     store,
		dice:      NewDice(cfg.Faults, cfg.Seed),
		slowDelay: cfg.SlowDelay,
		logger:    cfg.Logger,
		mux:       http.NewServeMux(),
		stopping:  make(chan struct{}),
	}
	h.mux.HandleFunc("POST /v1/transfers", h.createTransfer)
	h.mux.HandleFunc("GET /v1/transfers", h.listTransfers)
	h.mux.HandleFunc("GET /v1/transfers/{id}", h.getTransfer)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Stop releases the requests that faults hold: a hung request is dropped
// unanswered, a slow one answers now. Call it when the server starts
// shutting down (http.Server.RegisterOnShutdown), so they do not hold the
// shutdown up.
func (h *Handler) Stop() { h.stopOnce.Do(func() { close(h.stopping) }) }

func (h *Handler) createTransfer(w http.ResponseWriter, r *http.Request) {
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) != 1 || !validKey(keys[0]) {
		writeProblem(w, http.StatusBadRequest, "key-invalid", "send exactly one Idempotency-Key header of 1 to 255 visible ASCII characters")
		return
	}
	key := keys[0]
	req, err := decodeRequest(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
		writeProblem(w, http.StatusRequestEntityTooLarge, "body-too-large", err.Error())
		return
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "body-invalid", err.Error())
		return
	}

	fault := h.dice.Roll()
	if fault != NoFault {
		h.logger.Info("fault injected", "fault", fault.String(), "idempotency_key", key)
	}
	switch fault {
	case ErrorBefore:
		writeProblem(w, http.StatusInternalServerError, "internal", "the transfer was not executed")
		return
	case Hang:
		h.hold(r.Context(), nil)
		panic(http.ErrAbortHandler) // drop the connection without a response
	}
	// A bank does not undo a transfer because its caller hung up.
	ans, err := h.store.Transfer(context.WithoutCancel(r.Context()), key, req)
	switch {
	case errors.Is(err, ErrKeyReused):
		writeProblem(w, http.StatusUnprocessableEntity, "key-reused", "the Idempotency-Key was first used for another transfer")
		return
	case err != nil:
		h.logger.Error("transfer failed", "idempotency_key", key, "err", err)
		writeProblem(w, http.StatusInternalServerError, "internal", "the transfer's outcome is unknown")
		return
	}
	switch fault {
	case ErrorAfter:
		writeProblem(w, http.StatusInternalServerError, "internal", "an error occurred")
		return
	case SlowAfter:
		timer := time.NewTimer(h.slowDelay)
		defer timer.Stop()
		if !h.hold(r.Context(), timer.C) {
			panic(http.ErrAbortHandler) // the client left; nobody to answer
		}
	case ResetAfter:
		ResetConn(w)
		return
	}
	if ans.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, ans.Code, ans.Body)
}

// hold waits for done (nil: never), the server's shutdown or the client's
// departure, and reports whether the client is still there.
func (h *Handler) hold(ctx context.Context, done <-chan time.Time) bool {
	select {
	case <-done:
	case <-h.stopping:
	case <-ctx.Done():
		return false
	}
	return true
}

// ResetConn closes the request's connection with an RST, so the client
// reads "connection reset by peer" where it waited for the answer.
func ResetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not hijackable (HTTP/2): drop the stream instead
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST instead of FIN
	}
	_ = conn.Close()
}

func (h *Handler) getTransfer(w http.ResponseWriter, r *http.Request) {
	body, err := h.store.ByID(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not-found", "no transfer has this id")
	case err != nil:
		h.logger.Error("read transfer failed", "err", err)
		writeProblem(w, http.StatusInternalServerError, "internal", "the transfer could not be read")
	default:
		writeJSON(w, http.StatusOK, body)
	}
}

func (h *Handler) listTransfers(w http.ResponseWriter, r *http.Request) {
	var key *string
	if q := r.URL.Query(); q.Has("idempotency_key") {
		k := q.Get("idempotency_key")
		key = &k
	}
	ts, err := h.store.List(r.Context(), key)
	if err != nil {
		h.logger.Error("list transfers failed", "err", err)
		writeProblem(w, http.StatusInternalServerError, "internal", "the transfers could not be read")
		return
	}
	body, err := json.Marshal(struct {
		Transfers []json.RawMessage `json:"transfers"`
	}{ts})
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal", "the transfers could not be read")
		return
	}
	writeJSON(w, http.StatusOK, append(body, '\n'))
}

// validKey: 1 to 255 visible ASCII characters.
func validKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeProblem answers an RFC 9457 problem; name is the type's fragment
// in docs/bankd.md.
func writeProblem(w http.ResponseWriter, code int, name, detail string) {
	body, _ := json.Marshal(struct { // strings and an int always marshal
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{ProblemTypeBase + name, http.StatusText(code), code, detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}
