package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzCanonicalize(f *testing.F) {
	seeds := []string{
		``,
		` `,
		`null`,
		`{"b":1,"a":"é"}`,
		`{ "a": "\u00e9", "b": 1.0 }`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[-0,1e21,1e-7,0.000001,9007199254740993,1e400,1e-400,1e99999999999999999999]`,
		`[0.30000000000000000001,-12.5e-3,123456789012345680000,5e-324]`,
		`"\ud800"`,
		`"\udc00\ud800"`,
		"\"\xff\"",
		"\"\xed\xa0\x80\"",
		`{"a":1,"a":2}`,
		`{"a":1,"\u0061":2}`,
		`[01]`, `+1`, `.5`, `1.`, `1e`, `-`, `NaN`, `-Infinity`,
		`{"a":[1,2,{"c":null}]} `,
		`{"a":1}x`,
		"\"\t\"",
		`"\u0000\u001f\u2028<>&"`,
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001),
		strings.Repeat(`{"a":`, 50) + "1" + strings.Repeat("}", 50),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	// Plain t.Fatalf rather than testify: it keeps the hot loop free of
	// reflection and prints failing inputs verbatim.
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		out, err := Canonicalize(data)
		if !bytes.Equal(in, data) {
			t.Fatalf("Canonicalize modified its input")
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *SyntaxError", err, err)
			}
			if se.Offset < 0 || se.Offset > len(data) {
				t.Fatalf("offset %d outside input of length %d", se.Offset, len(data))
			}
			if out != nil {
				t.Fatalf("output %q returned alongside error %v", out, err)
			}
			return
		}
		// This parser is stricter than encoding/json, never looser.
		if !json.Valid(data) {
			t.Fatalf("accepted %q, which encoding/json rejects", data)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON", out, data)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("output %q of %q does not canonicalise: %v", out, data, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", data, out, again)
		}
		// Canonicalisation must not change meaning. Inputs accepted here are
		// valid UTF-8 without duplicate names, where encoding/json is faithful;
		// it rejects out-of-range numbers, and then must reject both sides.
		var vin, vout any
		errIn := json.Unmarshal(data, &vin)
		errOut := json.Unmarshal(out, &vout)
		if (errIn == nil) != (errOut == nil) {
			t.Fatalf("encoding/json disagrees: %q: %v, %q: %v", data, errIn, out, errOut)
		}
		if errIn == nil && !reflect.DeepEqual(vin, vout) {
			t.Fatalf("meaning changed: %q decodes to %#v, %q to %#v", data, vin, out, vout)
		}
	})
}
