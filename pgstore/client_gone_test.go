package pgstore_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
)

// In leased mode (handlers that call a bank) a client that disconnects
// mid-request, as a phone moving from Wi-Fi to 4G does, neither aborts the
// handler's call nor throws its answer away: the response is stored, and
// the retry on the new network gets it. The bank is charged once.
func TestLeasedClientDisconnectDoesNotChargeTwice(t *testing.T) {
	t.Parallel()
	for name, honoursContext := range map[string]bool{"HandlerHonoursContext": true, "HandlerFinishesItsCall": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			mw, err := idem.New(st, idem.Config{Mode: idem.ModeLeased})
			require.NoError(t, err)
			var charges atomic.Int32
			pay := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The bank call: the bank books the charge on receipt and
				// answers 300 ms later.
				charges.Add(1)
				ctx := r.Context()
				if !honoursContext {
					ctx = context.Background()
				}
				select {
				case <-time.After(300 * time.Millisecond):
				case <-ctx.Done():
					http.Error(w, "bank call aborted", http.StatusGatewayTimeout)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{"charged":true}`)
			}))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				pay.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), "alice")))
			}))
			defer srv.Close()
			post := func(timeout time.Duration) (int, error) {
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount":100}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "k1")
				resp, err := (&http.Client{Timeout: timeout}).Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				_, _ = io.ReadAll(resp.Body)
				return resp.StatusCode, nil
			}

			_, err = post(100 * time.Millisecond) // the network drops mid-request
			require.Error(t, err)
			// The SDK retries on the new network until it gets a final answer.
			var status int
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				status, err = post(time.Minute)
				require.NoError(t, err)
				if status != http.StatusConflict {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("final answer %d after %d bank charges", status, charges.Load())
			require.Equal(t, int32(1), charges.Load(), "one payment request, charged more than once")
		})
	}
}
