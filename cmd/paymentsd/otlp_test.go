package main_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/idem-dev/idem/internal/require"
)

// collector is an OTLP/HTTP receiver: it keeps the span names and
// attributes it is sent, and counts metric exports.
type collector struct {
	mu      sync.Mutex // guards the fields below
	spans   []map[string]string
	metrics int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					a := map[string]string{"name": s.Name}
					for _, kv := range s.Attributes {
						a[kv.Key] = kv.Value.String()
					}
					c.spans = append(c.spans, a)
				}
			}
		}
	case "/v1/metrics":
		c.metrics++
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// TestOTLPExport: with --otlp-endpoint, a payment's idem.request span and
// its store spans reach the collector, and metrics follow on shutdown.
func TestOTLPExport(t *testing.T) {
	t.Parallel()
	c := &collector{}
	col := httptest.NewServer(c)
	t.Cleanup(col.Close)
	s := startServer(t, newDB(t, "sqlite"), "--otlp-endpoint", col.URL)
	u := s.newUser(t)
	r := u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":10000}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	s.stop(t) // flushes the exporters
	c.mu.Lock()
	defer c.mu.Unlock()
	var request, get bool
	for _, a := range c.spans {
		switch a["name"] {
		case "idem.request":
			request = true
			require.Contains(t, a["idem.outcome"], "executed")
			require.Contains(t, a["http.route"], "POST /v1/deposits")
		case "idem.get":
			get = true
		}
	}
	require.True(t, request && get, "spans received: %v", c.spans)
	require.Positive(t, c.metrics)
}
