package keytable

import (
	"encoding/json"
	"fmt"
)

// EncodeProviderKeys is the provider_keys parameter of a phase's update:
// a JSON object, or nil (SQL NULL: nothing to record) for none.
func EncodeProviderKeys(keys map[string]string) any {
	if len(keys) == 0 {
		return nil
	}
	b, err := json.Marshal(keys)
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return string(b)
}

// DecodeProviderKeys reads the provider_keys column; NULL is none.
func DecodeProviderKeys(column *string) (map[string]string, error) {
	if column == nil {
		return nil, nil
	}
	var keys map[string]string
	if err := json.Unmarshal([]byte(*column), &keys); err != nil {
		return nil, fmt.Errorf("decode provider keys: %w", err)
	}
	return keys, nil
}
