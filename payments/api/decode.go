package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/money"
)

// member is one member of a request object: its name and how to read its
// value. parse returns what is wrong with the value, or "".
type member struct {
	name  string
	parse func(raw json.RawMessage) string
}

// decodeObject reads body as exactly one JSON object whose members are
// exactly members, all required. It is strict where encoding/json is
// lenient: invalid UTF-8, duplicate member names, unknown members and data
// after the object are errors. The idem middleware already refuses a
// malformed JSON body; this check holds without it too.
func decodeObject(body []byte, members ...member) error {
	var v payments.ValidationError
	whole := func(detail string) error {
		v.Add("", "%s", detail)
		return &v
	}
	if !utf8.Valid(body) {
		return whole("the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return whole("the body must be a JSON object")
	}
	values := map[string]json.RawMessage{}
	var order []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return whole("the body is not well-formed JSON")
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return whole("the body is not well-formed JSON")
		}
		if _, dup := values[name]; dup {
			v.Add(name, "appears more than once")
			continue
		}
		values[name] = raw
		order = append(order, name)
	}
	if _, err := dec.Token(); err != nil {
		return whole("the body is not well-formed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return whole("the body has data after its JSON object")
	}
	known := map[string]bool{}
	for _, m := range members {
		known[m.name] = true
		raw, ok := values[m.name]
		switch {
		case !ok:
			v.Add(m.name, "is required")
		default:
			if detail := m.parse(raw); detail != "" {
				v.Add(m.name, "%s", detail)
			}
		}
	}
	for _, name := range order {
		if !known[name] {
			v.Add(name, "is not a member of this request")
		}
	}
	return v.Err()
}

// currencyMember reads a currency code into dst. Whether it is supported
// is the service's call.
func currencyMember(name string, dst *string) member {
	return member{name, func(raw json.RawMessage) string {
		if err := json.Unmarshal(raw, dst); err != nil || string(raw) == "null" {
			return `must be a string holding a currency code, such as "USD"`
		}
		return ""
	}}
}

// integerLiteral is a JSON number without fraction or exponent.
var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// amountMember reads an amount of minor units into dst. Only a plain JSON
// integer is an amount: 1.5, 1.0, 1e3 and "100" are not, so no client's
// float or string handling ever decides how much money moves.
func amountMember(name string, dst *int64) member {
	return member{name, func(raw json.RawMessage) string {
		if !integerLiteral.Match(raw) {
			return "must be an integer number of minor units (cents; whole yen): no quotes, fraction or exponent"
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if errors.Is(err, strconv.ErrRange) || n < 1 || n > money.MaxAmount {
			return "must be an integer from 1 to " + strconv.FormatInt(money.MaxAmount, 10) + " (minor units)"
		}
		*dst = n
		return ""
	}}
}
