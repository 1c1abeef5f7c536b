// Package api is paymentsd's HTTP API: JSON over HTTP, authenticated with
// bearer API keys, with the routes that move money behind the idem
// middleware. api/openapi.yaml at the repository's root describes it.
//
// A request passes, in order: authentication (401 before anything else, so
// an unauthenticated request never reaches the key table), the media type
// check of a POST (415), the bounds of Limits (429, 503, 408), the idem middleware (key, body size, fingerprint,
// claim or replay) and the handler, which reaches the database only through
// the Ledger and so inside the request's ambient transaction.
package api

import (
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
)

// Config configures the API's handler.
type Config struct {
	// Service is the wallet. Required.
	Service *payments.Service
	// Idempotency wraps the routes that move money: an *idem.Middleware.
	// Required.
	Idempotency Idempotency
	// Logger receives the errors behind 500 and 503 responses, never a
	// request or response body. Default slog.Default().
	Logger *slog.Logger
	// Bank is where payouts go (POST /v1/payouts). Default none: payouts
	// are refused with 503 payouts-unavailable. Payouts run in leased mode
	// whatever the middleware's mode, and need its ProviderKeySecret.
	Bank payments.Bank
	// Limits bound the bodies and requests in flight on the routes that
	// move money. Its zero value is the defaults (see Limits).
	Limits Limits
	// Bounds, when set, holds the bounds instead of Limits: one Bounds
	// shared with another door (gRPC) bounds a user at both together.
	// Default: New makes one of Limits.
	Bounds *Bounds
}

// Idempotency is what the API needs of the idem middleware; *idem.Middleware
// is the one implementation paymentsd uses. It is an interface so that a
// benchmark can measure the same handlers without idempotency
// (cmd/bench's bare server); a payments API must never be served that way.
type Idempotency interface {
	Require(next http.Handler) http.Handler
	Config() idem.Config
}

var _ Idempotency = (*idem.Middleware)(nil)

// New returns the API's handler: /healthz and the /v1 routes.
func New(cfg Config) (http.Handler, error) {
	h, err := newHandlers(cfg)
	if err != nil {
		return nil, err
	}
	bounds := cfg.Bounds
	if bounds == nil {
		if bounds, err = NewBounds(cfg.Limits); err != nil {
			return nil, err
		}
	}
	lim := newLimiter(bounds, cfg.Idempotency.Config())
	once := func(f http.HandlerFunc) http.Handler { return requireJSON(lim.wrap(cfg.Idempotency.Require(f))) }
	// A payout calls the bank outside the database: it holds its key with
	// a lease, and its phases need leased mode (idem.Advance).
	payouts := cfg.Idempotency
	if m, ok := payouts.(*idem.Middleware); ok {
		if payouts, err = m.WithMode(idem.ModeLeased); err != nil {
			return nil, err
		}
	}

	v1 := http.NewServeMux()
	route(v1, "/v1/deposits", map[string]http.Handler{"POST": once(h.createDeposit)})
	route(v1, "/v1/deposits/{id}", map[string]http.Handler{"GET": http.HandlerFunc(h.getDeposit)})
	route(v1, "/v1/transactions", map[string]http.Handler{"POST": once(h.createTransaction)})
	route(v1, "/v1/transactions/{id}", map[string]http.Handler{"GET": http.HandlerFunc(h.getTransaction)})
	route(v1, "/v1/payouts", map[string]http.Handler{"POST": requireJSON(lim.wrap(payouts.Require(http.HandlerFunc(h.createPayout))))})
	route(v1, "/v1/payouts/{id}", map[string]http.Handler{"GET": http.HandlerFunc(h.getPayout)})
	route(v1, "/v1/balances", map[string]http.Handler{"GET": http.HandlerFunc(h.balances)})
	route(v1, "/v1/rates", map[string]http.Handler{"GET": http.HandlerFunc(h.rates)})
	v1.HandleFunc("/", notFound)

	root := http.NewServeMux()
	route(root, "/healthz", map[string]http.Handler{"GET": http.HandlerFunc(h.healthz)})
	root.Handle("/v1/", h.authenticate(v1))
	root.HandleFunc("/", notFound)
	return root, nil
}

// route registers a path's handlers by method, and a problem response for
// every other method (ServeMux's own 405 is plain text).
func route(mux *http.ServeMux, path string, byMethod map[string]http.Handler) {
	allow := ""
	for _, method := range slices.Sorted(maps.Keys(byMethod)) {
		mux.Handle(method+" "+path, byMethod[method])
		if allow != "" {
			allow += ", "
		}
		allow += method
		if method == http.MethodGet {
			allow += ", HEAD"
		}
	}
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeProblem(w, ProblemMethodNotAllowed, http.StatusMethodNotAllowed, r.Method+" is not allowed here; allowed: "+allow+".")
	})
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, ProblemNotFound, http.StatusNotFound, "There is no route "+r.URL.Path+".")
}

// newHandlers checks cfg and returns the handlers it configures.
func newHandlers(cfg Config) (*handlers, error) {
	if cfg.Service == nil {
		return nil, errors.New("api: Config.Service is required")
	}
	if cfg.Idempotency == nil || cfg.Idempotency == Idempotency((*idem.Middleware)(nil)) {
		return nil, errors.New("api: Config.Idempotency is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &handlers{svc: cfg.Service, log: cfg.Logger, keyHeader: cfg.Idempotency.Config().Header, bank: cfg.Bank}, nil
}

type handlers struct {
	svc       *payments.Service
	log       *slog.Logger
	keyHeader string
	bank      payments.Bank // nil: payouts refused
}
