package keytable

import (
	"encoding/json"
	"testing"
)

// TestEncodeHeaders: the headers are written byte for byte as
// json.Marshal writes them, plain or not.
func TestEncodeHeaders(t *testing.T) {
	t.Parallel()
	for _, h := range []map[string][]string{
		nil,
		{},
		{"Content-Type": {"application/json"}, "Location": {"/v1/things/1"}},
		{"B": {"1", "2"}, "A": nil, "C": {}, "D": {""}},
		{"Link": {`</a>; rel="next"`}},
		{"X-Note": {"caf\u00e9"}, "X-Bad": {"\xff"}, "X-Tab": {"a\tb"}},
		{"Z": {"z"}, "Y": {"y"}, "X": {"x"}, "W": {"w"}, "V": {"v"}, "U": {"u"}, "T": {"t"}, "S": {"s"}, "R": {"r"}},
	} {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeHeaders(h); got != string(want) {
			t.Errorf("EncodeHeaders(%v) = %s, want %s", h, got, want)
		}
	}
}

// TestEncodeHeadersAllocs: plain headers cost one allocation, the string.
func TestEncodeHeadersAllocs(t *testing.T) {
	h := map[string][]string{"Content-Type": {"application/json"}, "Location": {"/v1/things/1"}}
	if n := testing.AllocsPerRun(100, func() { EncodeHeaders(h) }); n > 1 {
		t.Errorf("EncodeHeaders allocates %v times, want 1", n)
	}
}
