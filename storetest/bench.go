package storetest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// BenchmarkConfig is what BenchmarkRequestPath measures on a store.
type BenchmarkConfig struct {
	// NewStore returns a store on an empty key table of its own.
	NewStore func(b *testing.B) store.Store
	// Handler is the handler behind the middleware: it answers 201.
	Handler http.Handler
	// MeasureFunc, when set, is called on each mode's store before its
	// requests; the function it returns is called after them with their
	// number, to report what the store measured (b.ReportMetric).
	MeasureFunc func(b *testing.B, s store.Store) func(n int)
}

// BenchmarkModes are the ways of holding a key BenchmarkRequestPath
// measures, each under its Mode's name (as make bench names them) and
// with a replay cache as paymentsd has: a fresh request claims without
// reading first.
var BenchmarkModes = []idem.Mode{idem.ModeAtomicDeferred, idem.ModeAtomic, idem.ModeLeased}

// BenchmarkRequestPath runs fresh keyed requests, a small JSON body each,
// through the middleware in each mode, and through the handler alone
// ("bare"), for the request path's allocations (-benchmem) and whatever
// MeasureFunc reports.
func BenchmarkRequestPath(b *testing.B, c BenchmarkConfig) {
	serve := func(b *testing.B, h http.Handler) int {
		n := 0
		for ; b.Loop(); n++ {
			benchRequest(b, h, "k"+strconv.Itoa(n), false)
		}
		return n
	}
	b.Run("bare", func(b *testing.B) { serve(b, c.Handler) })
	for _, mode := range BenchmarkModes {
		b.Run(mode.String(), func(b *testing.B) {
			s := c.NewStore(b)
			m, err := idem.New(s, idem.Config{Mode: mode, ReplayCacheBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Require(c.Handler)
			var report func(int)
			if c.MeasureFunc != nil {
				report = c.MeasureFunc(b, s)
			}
			n := serve(b, h)
			if report != nil {
				report(n)
			}
		})
	}
}

// BenchmarkReplayPath runs retries of completed keyed requests through
// the middleware in each mode without a replay cache: each is answered
// from one read of its key's record (store.Store.Get), as make bench's
// "(no cache)" replay variants are. The keys are completed first, through
// the same middleware; MeasureFunc, when set, is called after that.
func BenchmarkReplayPath(b *testing.B, c BenchmarkConfig) {
	const keys = 64
	for _, mode := range BenchmarkModes {
		b.Run(mode.String(), func(b *testing.B) {
			s := c.NewStore(b)
			m, err := idem.New(s, idem.Config{Mode: mode, ReplayCacheBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Require(c.Handler)
			for i := range keys {
				benchRequest(b, h, "k"+strconv.Itoa(i), false)
			}
			var report func(int)
			if c.MeasureFunc != nil {
				report = c.MeasureFunc(b, s)
			}
			n := 0
			for ; b.Loop(); n++ {
				benchRequest(b, h, "k"+strconv.Itoa(n%keys), true)
			}
			if report != nil {
				report(n)
			}
		})
	}
}

// benchRequest sends h a keyed request with a small JSON body, and fails
// b unless the answer is 201, replayed or not as replay says.
func benchRequest(b *testing.B, h http.Handler, key string, replay bool) {
	const body = `{"amount":100,"note":"EUR"}`
	r := httptest.NewRequest(http.MethodPost, "/v1/things", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	r = r.WithContext(idem.WithScope(r.Context(), "u1"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated || (w.Header().Get("Idempotent-Replayed") == "true") != replay {
		b.Fatalf("status %d, replayed %q (want %v): %s", w.Code, w.Header().Get("Idempotent-Replayed"), replay, w.Body)
	}
}

// BenchmarkHandler is make bench's trivial handler: it decodes a small
// JSON body, stores it through insert (which returns its id) and answers
// 201 with a Location and the thing as JSON. A nil insert numbers the
// things in memory.
func BenchmarkHandler(insert func(ctx context.Context, amount int64, note string) (int64, error)) http.Handler {
	var next int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var t struct {
			Amount int64  `json:"amount"`
			Note   string `json:"note"`
		}
		if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var id int64
		if insert == nil {
			next++
			id = next
		} else {
			var err error
			if id, err = insert(r.Context(), t.Amount, t.Note); err != nil {
				http.Error(w, "insert failed: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/things/"+strconv.FormatInt(id, 10))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(struct {
			ID     int64  `json:"id"`
			Amount int64  `json:"amount"`
			Note   string `json:"note"`
		}{id, t.Amount, t.Note})
	})
}
