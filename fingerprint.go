package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/idem-dev/idem/internal/jcs"
	"github.com/idem-dev/idem/store"
)

// FingerprintVersion is the version of the fingerprint algorithm new
// records are made with. Each record keeps the version it was made with and
// is always compared using that version, so changing the algorithm never
// turns retries of old requests into 422s.
const FingerprintVersion = 1

// fingerprinters holds every algorithm version still needed to compare old
// records. A new version is added here, never replacing an old one. Each
// is given r's target, r.URL.RequestURI(), computed once per request.
var fingerprinters = map[int]func(method, contentType, uri string, body []byte) ([]byte, error){
	1: fingerprintV1,
}

// NewFingerprint fingerprints a request with the current algorithm. It
// fails when a JSON body cannot be canonicalised.
func NewFingerprint(r *http.Request, body []byte) (store.Fingerprint, error) {
	return fingerprintWith(FingerprintVersion, r.Method, r.Header.Get("Content-Type"), r.URL.RequestURI(), body)
}

// fingerprintWith fingerprints what an algorithm version hashes of a
// request: its method, its Content-Type (whether the body is JSON), its
// target and its body.
func fingerprintWith(version int, method, contentType, uri string, body []byte) (store.Fingerprint, error) {
	fn, ok := fingerprinters[version]
	if !ok {
		return store.Fingerprint{}, fmt.Errorf("idem: unknown fingerprint version %d", version)
	}
	h, err := fn(method, contentType, uri, body)
	if err != nil {
		return store.Fingerprint{}, err
	}
	return store.Fingerprint{Version: version, Method: method, Path: uri, Hash: h}, nil
}

// fingerprint fingerprints an HTTP request, whose target is uri, with an
// algorithm version, over what Config.FingerprintFunc selects of its body.
func (m *Middleware) fingerprint(version int, r *http.Request, uri string, body []byte) (store.Fingerprint, error) {
	if m.cfg.FingerprintFunc != nil {
		var err error
		if body, err = m.cfg.FingerprintFunc(r, body); err != nil {
			return store.Fingerprint{}, err
		}
	}
	return fingerprintWith(version, r.Method, r.Header.Get("Content-Type"), uri, body)
}

// errEmptyJSON is a body declared JSON that holds nothing: not a JSON text
// (RFC 8259), so malformed as any other, and refused before anything is stored.
var errEmptyJSON = errors.New("the body is empty")

// fingerprintV1 is SHA-256 over length-prefixed fields: a version tag, the
// method, the path with its query, the body's kind, and the body (its RFC
// 8785 canonical form when the request says it is JSON, else its bytes).
// Length prefixes make the encoding unambiguous.
func fingerprintV1(method, contentType, uri string, body []byte) ([]byte, error) {
	kind := "raw"
	if isJSON(contentType) {
		if len(body) == 0 {
			return nil, errEmptyJSON
		}
		c, err := jcs.Canonicalize(body)
		if err != nil {
			return nil, err
		}
		kind, body = "json", c
	}
	// The fields are hashed as one buffer, on the stack for a small
	// request: the hash's only allocation is its result.
	const tag = "idem-fingerprint-v1"
	var small [512]byte
	buf := small[:0]
	if n := 5*8 + len(tag) + len(method) + len(uri) + len(kind) + len(body); n > len(small) {
		buf = make([]byte, 0, n)
	}
	for _, field := range [...]string{tag, method, uri, kind} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(field)))
		buf = append(buf, field...)
	}
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(body)))
	sum := sha256.Sum256(append(buf, body...))
	return sum[:], nil
}

// isJSON reports whether a Content-Type names JSON: application/json or any
// +json type.
func isJSON(contentType string) bool {
	switch contentType {
	case "":
		return false
	case "application/json":
		return true // the common case, without mime's parse and its allocation
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}
