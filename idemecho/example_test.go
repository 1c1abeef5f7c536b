package idemecho_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemecho"
	"github.com/idem-dev/idem/memstore"
)

// An echo route behind the middleware: a card declined is returned as an
// echo.HTTPError, rendered by echo's error handler inside the middleware,
// and stored: the retry gets the same 402 back, marked
// Idempotent-Replayed, without running the handler again. The example runs
// on memstore, the in-memory store; in production it is pgstore.New(pool)
// or sqlitestore.New(db).
func Example() {
	mw, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	e := echo.New()
	e.Use(middleware.Recover())
	runs := 0
	e.POST("/v1/payments", func(c *echo.Context) error {
		runs++
		return echo.NewHTTPError(http.StatusPaymentRequired, "card declined")
	}, idemecho.RequireWithConfig(mw, idemecho.Config{ScopeFunc: func(*echo.Context) string { return "user-42" }}))

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{"amount":1000}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()), "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 402 {"message":"card declined"} replayed: false
	// 402 {"message":"card declined"} replayed: true
	// handler runs: 1
}
