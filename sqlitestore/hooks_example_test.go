package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/sqlitestore"
)

// exampleStore is a migrated store on a file that cleanup removes.
func exampleStore() (st *sqlitestore.Store, cleanup func()) {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqlitestore.Open(filepath.Join(dir, "payments.db"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sqlitestore.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
	return sqlitestore.New(db), func() { db.Close(); os.RemoveAll(dir) }
}

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

// A client stamps each attempt with its own time: leave the field out of
// the fingerprint, or every retry would be a 422.
func Example_fingerprintFunc() {
	st, cleanup := exampleStore()
	defer cleanup()
	mw, err := idem.New(st, idem.Config{FingerprintFunc: idem.IgnoreJSONFields("sent_at")})
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
func Example_validateKeyAndProblemFunc() {
	st, cleanup := exampleStore()
	defer cleanup()
	mw, err := idem.New(st, idem.Config{
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
// options are checked when the route is built.
func Example_routeOptions() {
	st, cleanup := exampleStore()
	defer cleanup()
	mw, err := idem.New(st, idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	quick, err := mw.With(idem.RouteOptions{TTL: time.Hour, MaxRequestBytes: 16})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(quick.Config().TTL, mw.Config().TTL)
	post(quick.Require(http.HandlerFunc(created)), "k1", `{"amount":1000000000}`)

	_, err = mw.With(idem.RouteOptions{LeaseDuration: time.Hour})
	fmt.Println(err)
	// Output:
	// 1h0m0s 48h0m0s
	// 413 {"type":"https://github.com/idem-dev/idem/blob/main/docs/problems.md#body-too-large","title":"Request body too large","status":413,"detail":"The request body exceeds 16 bytes."} replayed: false
	// idem: route options: idem: MaxLeaseLife 5m0s is shorter than LeaseDuration 1h0m0s
}
