package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// server is the middleware over a real HTTP listener, in front of a handler
// that counts how often it runs, and how often a run's completion
// committed (an executed request): with ModeAtomicDeferred a duplicate's
// handler may run and be discarded.
type server struct {
	url      string
	store    store.Store
	mw       *idem.Middleware
	runs     atomic.Int32
	executed atomic.Int32
}

// handlerFunc is a test handler; n is its 1-based run count.
type handlerFunc func(w http.ResponseWriter, r *http.Request, n int)

// newServer serves h behind the middleware. The X-User header stands in for
// authentication and sets the scope.
func newServer(t *testing.T, st store.Store, cfg idem.Config, h handlerFunc) *server {
	t.Helper()
	s := &server{store: st}
	cfg.ObserveFunc = func(e idem.Event) {
		if e.Outcome == idem.OutcomeExecuted {
			s.executed.Add(1)
		}
	}
	mw, err := idem.New(st, cfg)
	require.NoError(t, err)
	s.mw = mw
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, int(s.runs.Add(1)))
	})
	mux := http.NewServeMux()
	mux.Handle("/v1/", mw.Require(next))
	mux.Handle("/optional/", mw.Optional(next))
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-User"); u != "" {
			r = r.WithContext(idem.WithScope(r.Context(), u))
		}
		mux.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(auth)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic test's recovered panic
	srv.Start()
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// call is one request to the server.
type call struct {
	method  string
	path    string
	user    string
	keys    []string // Idempotency-Key values; nil sends none
	body    string
	ctype   string
	headers map[string]string
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (s *server) do(t *testing.T, c call) reply {
	t.Helper()
	r, err := s.send(context.Background(), c)
	require.NoError(t, err)
	return r
}

func (s *server) send(ctx context.Context, c call) (reply, error) {
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.path == "" {
		c.path = "/v1/payments"
	}
	if c.user == "" {
		c.user = "alice"
	}
	if c.ctype == "" {
		c.ctype = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, c.method, s.url+c.path, bytes.NewBufferString(c.body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", c.ctype)
	if c.user != "-" {
		req.Header.Set("X-User", c.user)
	}
	for _, k := range c.keys {
		req.Header.Add("Idempotency-Key", k)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// problemType returns the name of a problem response's type, failing when
// the response is not application/problem+json.
func problemType(t *testing.T, r reply) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "body: %s", r.body)
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, r.status, p.Status)
	require.NotEmpty(t, p.Title)
	require.Contains(t, p.Type, idem.DefaultProblemTypeBase)
	name := p.Type[len(idem.DefaultProblemTypeBase):]
	// The retry advice a client reads without the body (docs/problems.md).
	shouldRetry := "false"
	switch idem.ProblemType(name) {
	case idem.ProblemInFlight, idem.ProblemLeaseLost, idem.ProblemStoreUnavailable:
		shouldRetry = "true"
	}
	require.Equal(t, shouldRetry, r.header.Get(idem.HeaderShouldRetry), "%s: body: %s", idem.HeaderShouldRetry, r.body)
	return name
}
