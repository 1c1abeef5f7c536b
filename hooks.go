package idem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/google/uuid"
)

// IgnoreJSONFields returns a Config.FingerprintFunc that leaves the named
// top-level fields of a JSON object body out of the fingerprint: a client's
// own timestamp or trace ID, which changes between retries of one request.
// A body that is not a JSON object (by Content-Type, as for the
// fingerprint itself) is fingerprinted whole.
func IgnoreJSONFields(names ...string) func(r *http.Request, body []byte) ([]byte, error) {
	return func(r *http.Request, body []byte) ([]byte, error) {
		return filterJSON(r, body, func(name string) bool { return !slices.Contains(names, name) })
	}
}

// SelectJSONFields returns a Config.FingerprintFunc that fingerprints only
// the named top-level fields of a JSON object body: what makes one request
// differ from another (an amount, a currency, a payee), whatever else the
// client sends. A body that is not a JSON object is fingerprinted whole.
func SelectJSONFields(names ...string) func(r *http.Request, body []byte) ([]byte, error) {
	return func(r *http.Request, body []byte) ([]byte, error) {
		return filterJSON(r, body, func(name string) bool { return slices.Contains(names, name) })
	}
}

// filterJSON keeps the top-level fields of a JSON object body for which
// keep is true.
func filterJSON(r *http.Request, body []byte, keep func(name string) bool) ([]byte, error) {
	if !isJSON(r.Header.Get("Content-Type")) || len(body) == 0 {
		return body, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return body, nil // valid JSON, not an object
		}
		return nil, err
	}
	for name := range fields {
		if !keep(name) {
			delete(fields, name)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("re-encode body: %w", err)
	}
	return b, nil
}

// UUIDKey is a Config.ValidateKeyFunc that accepts only keys that are UUIDs
// in their canonical form, 8-4-4-4-12 hexadecimal digits.
func UUIDKey(key string) error {
	if _, err := uuid.Parse(key); err != nil || len(key) != 36 {
		return errors.New("the key must be a UUID, such as 123e4567-e89b-12d3-a456-426614174000")
	}
	return nil
}
