package jcs_test

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/jcs"
)

func ExampleCanonicalize() {
	// Two spellings of the same payment request.
	a := []byte(`{"currency": "EUR", "amount": 10.50, "payee": "Z\u00fcrich \u20ac"}`)
	b := []byte(`{"payee":"Zürich €","amount":1050e-2,"currency":"EUR"}`)

	ca, err := jcs.Canonicalize(a)
	if err != nil {
		panic(err)
	}
	cb, err := jcs.Canonicalize(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(ca))
	fmt.Println(sha256.Sum256(ca) == sha256.Sum256(cb))

	// Amounts a float64 cannot tell apart still canonicalise differently.
	big, _ := jcs.Canonicalize([]byte(`{"amount":9007199254740993}`))
	fmt.Println(string(big))

	_, err = jcs.Canonicalize([]byte(`{"amount":1,"amount":2}`))
	var se *jcs.SyntaxError
	fmt.Println(errors.As(err, &se), se.Offset, err)

	// Output:
	// {"amount":10.5,"currency":"EUR","payee":"Zürich €"}
	// true
	// {"amount":9007199254740993}
	// true 12 duplicate member name "amount" at offset 12
}
