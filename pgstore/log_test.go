package pgstore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
)

func TestLogEvents(t *testing.T) {
	t.Parallel()
	const secret = "4111-1111-SECRET"

	t.Run("OneLinePerRequestAndNeverABody", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Pool(t, 4)
		migrate(t, pool)
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		mw, err := idem.New(pgstore.New(pool), idem.Config{ObserveFunc: idem.LogEvents(logger)})
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments", mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), "fail") {
				w.WriteHeader(http.StatusBadGateway)
				fmt.Fprintf(w, "bank said no to %s", body)
				return
			}
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"echo": %s, "card": %q}`, body, secret)
		})))
		send := func(key, body string) int {
			req := keyed(key, body)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			return w.Code
		}
		card := `{"card":"` + secret + `"}`
		require.Equal(t, 201, send("k1", card))
		require.Equal(t, 201, send("k1", card))                                 // replayed
		require.Equal(t, 422, send("k1", `{"card":"`+secret+`-2"}`))            // mismatch
		require.Equal(t, 400, send("k2", `{"card": `+secret))                   // malformed JSON
		require.Equal(t, 502, send("k3", `{"card":"`+secret+`", "x": "fail"}`)) // failed

		var lines []map[string]any
		for line := range strings.Lines(buf.String()) {
			require.NotContains(t, line, secret, "a body reached the log")
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec))
			lines = append(lines, rec)
		}
		require.Len(t, lines, 5, "one line per request")
		for i, want := range []struct {
			key, outcome string
			status       float64
		}{
			{"k1", "executed", 201},
			{"k1", "replayed", 201},
			{"k1", "key_reused", 422},
			{"k2", "invalid_body", 400},
			{"k3", "failed", 502},
		} {
			l := lines[i]
			require.Equal(t, "idempotent request", l["msg"])
			require.Equal(t, "INFO", l["level"])
			require.Equal(t, "alice", l["scope"])
			require.Equal(t, want.key, l["key"])
			require.Equal(t, "POST /v1/payments", l["route"])
			require.Equal(t, "/v1/payments", l["path"])
			require.Equal(t, want.outcome, l["outcome"])
			require.Equal(t, want.status, l["status"])
			require.Contains(t, l, "duration")
			require.NotContains(t, l, "error")
		}
	})

	t.Run("StoreErrorIsAnError", func(t *testing.T) {
		t.Parallel()
		store := pgstore.New(pgtest.Pool(t, 2))
		store.Pool().Close()
		var buf bytes.Buffer
		mw, err := idem.New(store, idem.Config{ObserveFunc: idem.LogEvents(slog.New(slog.NewJSONHandler(&buf, nil))), ReplayCacheBytes: -1})
		require.NoError(t, err)
		w := httptest.NewRecorder()
		mw.Require(http.NotFoundHandler()).ServeHTTP(w, keyed("k1", `{"card":"`+secret+`"}`))
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		var rec map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
		require.Equal(t, "ERROR", rec["level"])
		require.Equal(t, "store_unavailable", rec["outcome"])
		require.Contains(t, rec["error"], "look up key")
		require.NotContains(t, buf.String(), secret)
	})
}
