package idem_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

// The examples run on memstore, the in-memory store; in production the
// store is pgstore.New(pool) or sqlitestore.New(db), and a handler's
// writes join the request's transaction through pgstore.DB or
// sqlitestore.DB (their examples show it).

// post sends a payment as user-42 with key and body, and prints the answer.
func post(h http.Handler, key, body string) {
	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
	req = req.WithContext(idem.WithScope(req.Context(), "user-42"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()), "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
}

func created(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, `{"payment":"p1"}`)
}

// A payment handler behind the middleware: the first request runs, the
// retry gets the first response back, byte for byte.
func Example() {
	mw, err := idem.New(memstore.New(), idem.Config{}) // leased, the default mode
	if err != nil {
		log.Fatal(err)
	}

	runs := 0
	pay := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d}`, runs)
	}))
	// Authentication says whose request it is; keys are scoped by it.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pay.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "user-42")))
	})

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount":1000}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7-attempt")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Body.String(), "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 {"payment":1} replayed: false
	// 201 {"payment":1} replayed: true
	// handler runs: 1
}

// A client stamps each attempt with its own time: leave the field out of
// the fingerprint, or every retry would be a 422.
func ExampleIgnoreJSONFields() {
	mw, err := idem.New(memstore.New(), idem.Config{FingerprintFunc: idem.IgnoreJSONFields("sent_at")})
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Require(http.HandlerFunc(created))
	post(h, "k1", `{"amount":1000,"sent_at":"2026-05-01T10:00:00Z"}`)
	post(h, "k1", `{"amount":1000,"sent_at":"2026-05-01T10:00:07Z"}`)
	post(h, "k1", `{"amount":2000,"sent_at":"2026-05-01T10:00:09Z"}`)
	// Output:
	// 201 {"payment":"p1"} replayed: false
	// 201 {"payment":"p1"} replayed: true
	// 422 {"type":"https://github.com/idem-dev/idem/blob/main/docs/problems.md#key-reused","title":"Idempotency key reused","status":422,"detail":"This Idempotency-Key was already used for a different request (POST /v1/payments with another body). Use a new key for a new request."} replayed: false
}

// Keys must be UUIDs, and the middleware's own errors come in the team's
// error format.
func ExampleConfig_problemFunc() {
	mw, err := idem.New(memstore.New(), idem.Config{
		ValidateKeyFunc: idem.UUIDKey,
		ProblemFunc: func(p idem.Problem) idem.Response {
			return idem.Response{
				StatusCode: p.Status,
				Header:     http.Header{"Content-Type": {"application/json"}},
				Body:       fmt.Appendf(nil, `{"error":{"code":%q,"message":%q}}`, p.Type, p.Detail),
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Require(http.HandlerFunc(created))
	post(h, "order-7", `{"amount":1000}`)
	post(h, "9b2f4a52-3c1e-4d5f-8a6b-7c8d9e0f1a2b", `{"amount":1000}`)
	// Output:
	// 400 {"error":{"code":"key-invalid","message":"The Idempotency-Key header is invalid: the key must be a UUID, such as 123e4567-e89b-12d3-a456-426614174000."}} replayed: false
	// 201 {"payment":"p1"} replayed: false
}

// One route keeps its keys an hour and takes bodies up to 16 bytes; the
// rest is the middleware's, and the route's Config is checked when the
// route is built.
func ExampleMiddleware_With() {
	mw, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	quick, err := mw.With(idem.Config{TTL: time.Hour, MaxRequestBytes: 16})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(quick.Config().TTL, mw.Config().TTL)
	post(quick.Require(http.HandlerFunc(created)), "k1", `{"amount":1000000000}`)

	_, err = mw.With(idem.Config{LeaseDuration: time.Hour})
	fmt.Println(err)
	// Output:
	// 1h0m0s 48h0m0s
	// 413 {"type":"https://github.com/idem-dev/idem/blob/main/docs/problems.md#body-too-large","title":"Request body too large","status":413,"detail":"The request body exceeds 16 bytes."} replayed: false
	// idem: route config: idem: MaxLeaseLife 5m0s is shorter than LeaseDuration 1h0m0s
}

// One log line per request that carries a key, beside a metric of one's
// own.
func ExampleLogEvents() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		// Times differ on every run; the example leaves them out.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" {
				return slog.Attr{}
			}
			return a
		},
	}))
	replays := 0
	countReplays := func(e idem.Event) {
		if e.Outcome == idem.OutcomeReplayed {
			replays++
		}
	}
	mw, err := idem.New(memstore.New(), idem.Config{ObserveFunc: idem.ObserveAll(countReplays, idem.LogEvents(logger))})
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Require(http.HandlerFunc(created))
	post(h, "k1", `{"amount":1000}`)
	post(h, "k1", `{"amount":1000}`)
	fmt.Println("replays:", replays)
	// Output:
	// level=INFO msg="idempotent request" scope=user-42 key=k1 method=POST path=/v1/payments route="" mode=leased outcome=executed status=201
	// 201 {"payment":"p1"} replayed: false
	// level=INFO msg="idempotent request" scope=user-42 key=k1 method=POST path=/v1/payments route="" mode=leased outcome=replayed status=201
	// 201 {"payment":"p1"} replayed: true
	// replays: 1
}

// A payout in two phases (docs/payouts.md): phase A commits the debit with
// the recovery point PointOutcomeUnknown before the bank is called with
// the derived key; the bank does not answer, so the request answers 202
// and stores nothing; the completer resumes it at its point, asks the bank
// again with the same key, and stores the final answer, which the client's
// retry then gets.
func ExampleAdvance() {
	ctx := context.Background()
	s := memstore.New()
	mw, err := idem.New(s, idem.Config{Mode: idem.ModeLeased, ProviderKeySecret: []byte("a secret of at least 16 bytes")})
	if err != nil {
		log.Fatal(err)
	}

	// The bank: it deduplicates by key; its first answer is lost.
	transfers := map[string]bool{}
	answers := 0
	send := func(key string) bool {
		transfers[key] = true
		answers++
		return answers > 1
	}
	debits := 0
	payout := func(ctx context.Context) idem.Response {
		point, err := idem.RecoveryPoint(ctx)
		if err != nil {
			return idem.Response{StatusCode: http.StatusServiceUnavailable}
		}
		bankKey, err := idem.ProviderKey(ctx, "bank")
		if err != nil {
			return idem.Response{StatusCode: http.StatusInternalServerError}
		}
		if point == "" {
			// The debit's writes would go through pgstore.DB(ctx, pool):
			// they commit with the point.
			err := idem.Advance(ctx, idem.PointOutcomeUnknown, func(context.Context) error {
				debits++
				return nil
			})
			if err != nil {
				return idem.Response{StatusCode: http.StatusInternalServerError}
			}
		}
		if !send(bankKey) { // resuming, the same key: the bank deduplicates
			if err := idem.Pending(ctx); err != nil {
				return idem.Response{StatusCode: http.StatusInternalServerError}
			}
			return idem.Response{StatusCode: http.StatusAccepted, Body: []byte("pending")}
		}
		return idem.Response{StatusCode: http.StatusCreated, Body: []byte("paid")}
	}

	h := sha256.Sum256([]byte(`{"amount":2500}`))
	call := idem.Call{Scope: "alice", Key: "payout-1", Method: "POST", Route: "/v1/payouts",
		Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/payouts", Hash: h[:]}}
	first := mw.Do(ctx, call, payout)
	fmt.Println("request:", first.Response.StatusCode, string(first.Response.Body))

	c, err := completer.New(mw, s, func(ctx context.Context, _ store.Unfinished) idem.Response { return payout(ctx) }, completer.Config{})
	if err != nil {
		log.Fatal(err)
	}
	round, err := c.RunOnce(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completer finished:", round.Finished)
	retry := mw.Do(ctx, call, payout)
	fmt.Println("retry:", retry.Response.StatusCode, string(retry.Response.Body), "replayed:", retry.Replayed)
	fmt.Println("debits:", debits, "transfers:", len(transfers))
	// Output:
	// request: 202 pending
	// completer finished: 1
	// retry: 201 paid replayed: true
	// debits: 1 transfers: 1
}

// A door of your own (a proxy, a gRPC status) says whether its answer asks
// for a retry as the middleware does.
func ExampleShouldRetryHeader() {
	for _, status := range []int{201, 409, 429, 503} {
		fmt.Println(status, idem.HeaderShouldRetry+":", idem.ShouldRetryHeader(status))
	}
	// Output:
	// 201 Idempotent-Should-Retry: false
	// 409 Idempotent-Should-Retry: false
	// 429 Idempotent-Should-Retry: true
	// 503 Idempotent-Should-Retry: true
}
