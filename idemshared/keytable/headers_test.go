package keytable

import (
	"encoding/json"
	"reflect"
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

// headerDocs are stored headers as EncodeHeaders writes them, as
// PostgreSQL's jsonb prints them back, and what neither writes.
var headerDocs = []string{
	`null`, ` null `, `{}`, `{ }`,
	`{"Content-Type":["application/json"],"Location":["/v1/things/1"]}`,
	`{"Location": ["/v1/things/1"], "Content-Type": ["application/json"]}`,
	`{"A":null,"B":["1","2"],"C":[],"D":[""]}`,
	`{"A": null, "B": ["1", "2"], "C": [], "D": [""]}`,
	"{\n\t\"A\" : [ \"x\" , \"y\" ]\r}",
	`{"A":["1"],"A":["2"]}`,
	`{"Link":["\u003c/a\u003e; rel=\"next\""]}`,
	`{"X-Note":["café"]}`,
	`{"A":["1",]}`, `{"A":["1"],}`, `{"A":[1]}`, `{"A":"1"}`, `{"A":["1"]`, `{"A":["1"]} x`,
	`["A"]`, `nul`, ``, `{"A":["a` + "\x01" + `"]}`, `{"A" ["1"]}`, `{,"A":["1"]}`, `{"A":["1"] "B":["2"]}`,
}

// TestDecodeHeaders: what json.Unmarshal reads, DecodeHeaders reads alike;
// what it refuses, DecodeHeaders refuses.
func TestDecodeHeaders(t *testing.T) {
	t.Parallel()
	for _, doc := range headerDocs {
		checkDecodeHeaders(t, doc)
	}
}

func FuzzDecodeHeaders(f *testing.F) {
	for _, doc := range headerDocs {
		f.Add(doc)
	}
	f.Fuzz(checkDecodeHeaders)
}

func checkDecodeHeaders(t *testing.T, doc string) {
	var want map[string][]string
	wantErr := json.Unmarshal([]byte(doc), &want)
	got, err := DecodeHeaders([]byte(doc))
	switch {
	case (err == nil) != (wantErr == nil):
		t.Errorf("DecodeHeaders(%q): error %v, json.Unmarshal's %v", doc, err, wantErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Errorf("DecodeHeaders(%q) = %#v, json.Unmarshal reads %#v", doc, got, want)
	}
}

// TestDecodeHeadersAllocs: plain headers cost the string, the array of
// values and the map (its header and its one group of slots).
func TestDecodeHeadersAllocs(t *testing.T) {
	doc := []byte(`{"Location": ["/v1/things/1"], "Content-Type": ["application/json"]}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeHeaders(doc) }); n > 4 {
		t.Errorf("DecodeHeaders allocates %v times, want at most 4", n)
	}
}

func BenchmarkDecodeHeaders(b *testing.B) {
	doc := []byte(`{"Location": ["/v1/things/1"], "Content-Type": ["application/json"]}`)
	b.Run("DecodeHeaders", func(b *testing.B) {
		for b.Loop() {
			_, _ = DecodeHeaders(doc)
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var h map[string][]string
			_ = json.Unmarshal(doc, &h)
		}
	})
}
