package idem

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/store"
)

// A record is always compared with the algorithm version that made it, so
// a new version never turns retries of old requests into 422s.
func TestRecordsAreComparedWithTheirOwnVersion(t *testing.T) {
	const next = FingerprintVersion + 1
	fingerprinters[next] = func(_, _, _ string, _ []byte) ([]byte, error) {
		return []byte("a different algorithm"), nil
	}
	t.Cleanup(func() { delete(fingerprinters, next) })

	body := `{"amount":100}`
	r := httptest.NewRequest("POST", "/v1/payments", strings.NewReader(body))
	const contentType = "application/json"
	r.Header.Set("Content-Type", contentType)
	old, err := fingerprintWith(FingerprintVersion, r.Method, contentType, r.URL.RequestURI(), []byte(body))
	require.NoError(t, err)
	current, err := fingerprintWith(next, r.Method, contentType, r.URL.RequestURI(), []byte(body))
	require.NoError(t, err)
	require.NotEqual(t, old.Hash, current.Hash)

	m := &Middleware{}
	q := &request{r: r, body: []byte(body), claim: store.Claim{Fingerprint: current}}
	require.True(t, m.sameRequest(q, old), "the old record is compared with the old algorithm")
	changed := &request{r: r, body: []byte(`{"amount":101}`), claim: store.Claim{Fingerprint: current}}
	require.False(t, m.sameRequest(changed, old))
	_, err = fingerprintWith(next+1, r.Method, contentType, r.URL.RequestURI(), []byte(body))
	require.ErrorContains(t, err, "unknown fingerprint version")
}
