package idem_test

import (
	"encoding/hex"
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

// TestFingerprintV1Stable pins version 1's hashes: records made by every
// build so far hold them, and a retry's fingerprint must still match.
func TestFingerprintV1Stable(t *testing.T) {
	t.Parallel()
	big := `{"note":"` + strings.Repeat("x", 600) + `"}`
	for _, c := range []struct{ method, target, ctype, body, want string }{
		{"POST", "/v1/payments?a=1", "application/json", `{"b":1,"a":"é"}`, "615ce2968fd030beb9c2a841dbeedac52f545914002eb1572ee2be2e8f7f99ba"},
		{"PUT", "/v1/x", "text/plain", "raw bytes", "373d15b74edf1aa7e8f38bf3ae4e8d559c5fe439f8c9669397b6a72bb426879f"},
		{"POST", "/v1/payments", "", "", "4bad0b33a85cd6f18b35489b1611051831d46b40275a3f3a0c1dd4211430f7f0"},
		{"POST", "/v1/big", "application/json", big, "038d86e4b41a5863eb3cd40ac26c390890b80ce12a9e8b5d43fd29802c7fad00"},
	} {
		fp := fingerprint(t, c.method, c.target, c.ctype, c.body)
		require.Equal(t, c.want, hex.EncodeToString(fp.Hash), c.method, c.target)
	}
}
