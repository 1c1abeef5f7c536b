package main_test

// Bodies that are not JSON, at every door of one paymentsd
// (docs/hostile.md).

import (
	"net/http"
	"testing"

	"github.com/idem-dev/idem/internal/require"
)

// TestEmptyJSONBody sends an empty body that says it is JSON: it is
// malformed JSON like any other, 400 body-invalid and nothing stored, so
// the client's corrected request may use the same key; over HTTP and NATS
// (whose commands are JSON).
func TestEmptyJSONBody(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			s := startServer(t, newDB(t, store), "--nats-url", url)
			u := s.newUser(t)
			key := newKey()
			r := do(t, s, u, http.MethodPost, "/v1/deposits", "", "Idempotency-Key", key, "Content-Type", "application/json")
			require.Equal(t, http.StatusBadRequest, r.status, "over HTTP: %s", r)
			require.Equal(t, "body-invalid", r.problemType(t))
			m := newNATSCommander(t, url, u).send(t, "deposits", newKey(), "")
			require.Equal(t, http.StatusBadRequest, m.status, "over NATS: %s", m)
			require.Contains(t, string(m.body), "body-invalid")
			require.Equal(t, int64(0), u.storedKeys(t), "nothing stored")
			r = u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":100}`)
			require.Equal(t, http.StatusCreated, r.status, "the corrected request, same key: %s", r)
		})
	}
}
