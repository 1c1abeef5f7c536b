package sqlitestore_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/require"
)

// BenchmarkRequestPath runs fresh keyed requests through the middleware
// in each mode the store serves (it cannot defer a claim), on a trivial
// handler, for the allocations of the request path (-benchmem); "bare" is
// the handler alone.
func BenchmarkRequestPath(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/payments/p1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"p1","amount":100}`))
	})
	const body = `{"amount":100,"currency":"EUR"}`
	serve := func(b *testing.B, h http.Handler) {
		for i := 0; b.Loop(); i++ {
			r := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", "k"+strconv.Itoa(i))
			r = r.WithContext(idem.WithScope(r.Context(), "u1"))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { serve(b, handler) })
	for _, mode := range []idem.Mode{idem.ModeLeased, idem.ModeAtomic} {
		b.Run(mode.String(), func(b *testing.B) {
			s, _ := newStore(b)
			m, err := idem.New(s, idem.Config{Mode: mode})
			require.NoError(b, err)
			serve(b, m.Require(handler))
		})
	}
}
