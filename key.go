package idem

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLength is the longest key accepted, in characters after unquoting.
const MaxKeyLength = 255

// ErrKeyMissing is returned by ParseKey when the header is absent.
var ErrKeyMissing = errors.New("idem: Idempotency-Key header is missing")

// ParseKey validates the values of the key header and returns the key. The
// header must appear once, as a bare key or as an RFC 8941 quoted string
// without parameters; "abc" and abc are the same key. After unquoting the
// key is 1 to 255 characters of visible ASCII (0x21 to 0x7E).
func ParseKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrKeyMissing
	case 1:
	default:
		return "", errors.New("the header is given more than once")
	}
	v := strings.Trim(values[0], " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		k, rest, err := unquote(v)
		if err != nil {
			return "", err
		}
		if rest != "" {
			if strings.HasPrefix(strings.TrimLeft(rest, " \t"), ";") {
				return "", errors.New("parameters are not allowed")
			}
			return "", errors.New("unexpected characters after the quoted string")
		}
		key = k
	} else {
		// A bare key: ';' would start parameters and ',' a list in a
		// structured field, and '"' and '\' belong to quoted strings only
		// (ab"c must not be a second spelling of "ab\"c").
		if i := strings.IndexAny(v, ";,\"\\"); i >= 0 {
			switch v[i] {
			case ';':
				return "", errors.New("parameters are not allowed")
			case ',':
				return "", errors.New("a list of keys is not allowed")
			}
			return "", fmt.Errorf("%q is allowed only inside a quoted key", v[i])
		}
		key = v
	}
	if key == "" {
		return "", errors.New("the key is empty")
	}
	if len(key) > MaxKeyLength {
		return "", fmt.Errorf("the key is %d characters long; the maximum is %d", len(key), MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("character %d (0x%02X) is not visible ASCII", i+1, c)
		}
	}
	return key, nil
}

// unquote parses an RFC 8941 sf-string at the start of s and returns its
// value and what follows it.
func unquote(s string) (value, rest string, err error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", "", errors.New(`a quoted key may escape only '"' and '\'`)
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), s[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", "", fmt.Errorf("character 0x%02X is not allowed in a quoted key", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("the quoted key has no closing quote")
}
