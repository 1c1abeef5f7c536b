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

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/sqlitestore"
)

// A payment handler behind the middleware: the first request runs, the
// retry gets the first response back, byte for byte.
func Example_middleware() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitestore.Open(filepath.Join(dir, "payments.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlitestore.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
	mw, err := idem.New(sqlitestore.New(db), idem.Config{Mode: idem.ModeAtomic})
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
