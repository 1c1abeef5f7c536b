package idem_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

func fingerprint(t *testing.T, method, target, ctype, body string) store.Fingerprint {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	fp, err := idem.NewFingerprint(r, []byte(body))
	require.NoError(t, err)
	return fp
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := fingerprint(t, "POST", "/v1/payments?a=1", "application/json", `{"b":1,"a":"é"}`)
	require.Equal(t, idem.FingerprintVersion, base.Version)
	require.Equal(t, "POST", base.Method)
	require.Equal(t, "/v1/payments?a=1", base.Path)
	require.Len(t, base.Hash, 32)

	t.Run("EquivalentJSONIsTheSameRequest", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{
			`{ "a": "\u00e9", "b": 1.0 }`,
			"{\n\t\"b\": 1e0,\n\t\"a\": \"\\u00E9\"\n}",
			`{"a":"é","b":10E-1}`,
		} {
			require.Equal(t, base, fingerprint(t, "POST", "/v1/payments?a=1", "application/json; charset=utf-8", body), body)
		}
		require.Equal(t, base, fingerprint(t, "POST", "/v1/payments?a=1", "application/merge-patch+json", `{"a":"é","b":1}`))
	})

	t.Run("DifferentRequestsDiffer", func(t *testing.T) {
		t.Parallel()
		others := map[string]store.Fingerprint{
			"Body":       fingerprint(t, "POST", "/v1/payments?a=1", "application/json", `{"b":2,"a":"é"}`),
			"Method":     fingerprint(t, "PUT", "/v1/payments?a=1", "application/json", `{"b":1,"a":"é"}`),
			"Path":       fingerprint(t, "POST", "/v1/refunds?a=1", "application/json", `{"b":1,"a":"é"}`),
			"Query":      fingerprint(t, "POST", "/v1/payments?a=2", "application/json", `{"b":1,"a":"é"}`),
			"NotJSON":    fingerprint(t, "POST", "/v1/payments?a=1", "text/plain", `{"b":1,"a":"é"}`),
			"BigInteger": fingerprint(t, "POST", "/v1/payments?a=1", "application/json", `{"b":9007199254740993,"a":"é"}`),
		}
		for name, fp := range others {
			require.NotEqual(t, base.Hash, fp.Hash, name)
		}
		// Amounts a double cannot tell apart are still different requests.
		require.NotEqual(t,
			fingerprint(t, "POST", "/p", "application/json", `{"amount":9007199254740993}`).Hash,
			fingerprint(t, "POST", "/p", "application/json", `{"amount":9007199254740992}`).Hash)
	})

	t.Run("RawBodiesAreComparedByteForByte", func(t *testing.T) {
		t.Parallel()
		a := fingerprint(t, "POST", "/p", "", `{"a":1}`)
		b := fingerprint(t, "POST", "/p", "", `{ "a":1}`)
		require.NotEqual(t, a.Hash, b.Hash)
	})

	t.Run("InvalidJSONIsRejected", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{`{"a":`, `{"a":1,"a":2}`, `{"a":1} x`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`} {
			r := httptest.NewRequest("POST", "/p", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			_, err := idem.NewFingerprint(r, []byte(body))
			require.Error(t, err, body)
		}
	})
}
