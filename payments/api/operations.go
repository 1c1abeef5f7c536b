package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/store"
)

// Operation names an operation that moves money as the doors other than
// HTTP name it: the last token of a queue subject, a gRPC method's.
type Operation string

// The operations, with the routes they share everything with.
const (
	OpDeposit     Operation = "deposits"     // POST /v1/deposits
	OpTransaction Operation = "transactions" // POST /v1/transactions
	// OpPayout is POST /v1/payouts: run it in leased mode, with a Bank
	// configured (Config.Bank).
	OpPayout Operation = "payouts"
)

// Operations runs the API's operations for doors other than HTTP (queue
// messages, gRPC calls): the handlers, fingerprints and answers of the
// HTTP routes, so that one key is one effect whichever door it comes by,
// and a retry through another door replays.
type Operations struct {
	h      *handlers
	routes map[Operation]http.HandlerFunc
	reads  *http.ServeMux // the GET routes, for Read
}

// NewOperations returns the operations of the API cfg configures.
func NewOperations(cfg Config) (*Operations, error) {
	h, err := newHandlers(cfg)
	if err != nil {
		return nil, err
	}
	reads := http.NewServeMux()
	for path, read := range map[string]http.HandlerFunc{
		"/v1/deposits/{id}": h.getDeposit, "/v1/transactions/{id}": h.getTransaction, "/v1/payouts/{id}": h.getPayout,
		"/v1/balances": h.balances, "/v1/rates": h.rates,
	} {
		reads.HandleFunc("GET "+path, read)
	}
	reads.HandleFunc("/", notFound)
	return &Operations{h: h, routes: map[Operation]http.HandlerFunc{
		OpDeposit: h.createDeposit, OpTransaction: h.createTransaction, OpPayout: h.createPayout,
	}, reads: reads}, nil
}

// Read answers GET path (such as "/v1/deposits/"+url.PathEscape(id)) for
// user, as the HTTP API does: a resource of another user's is 404.
func (o *Operations) Read(ctx context.Context, user, path string) idem.Response {
	w := &replyWriter{header: http.Header{}}
	r, err := http.NewRequestWithContext(idem.WithScope(ctx, user), http.MethodGet, path, http.NoBody)
	if err != nil {
		writeProblem(w, ProblemNotFound, http.StatusNotFound, "There is no route "+path+".")
		return w.reply()
	}
	o.reads.ServeHTTP(w, r)
	return w.reply()
}

// Authenticate returns the user whose API key the Authorization values
// carry (one "Bearer <api key>"): payments.ErrUnauthorized for none or an
// unknown one, another error when the database fails.
func (o *Operations) Authenticate(ctx context.Context, authorization []string) (string, error) {
	token, ok := bearerToken(authorization)
	if !ok {
		return "", payments.ErrUnauthorized
	}
	return o.h.svc.Authenticate(ctx, token)
}

// Fingerprint is the fingerprint the HTTP door gives op's request with
// body (a JSON body, in its canonical form).
func (o *Operations) Fingerprint(op Operation, body []byte) (store.Fingerprint, error) {
	if _, ok := o.routes[op]; !ok {
		return store.Fingerprint{}, fmt.Errorf("no operation %q", op)
	}
	return idem.NewFingerprint(request(context.Background(), op, body), body)
}

// Run runs op for user with body and returns what the HTTP API answers.
// ctx is the key's (idem's Do): its transaction and its key.
func (o *Operations) Run(ctx context.Context, op Operation, user string, body []byte) idem.Response {
	w := &replyWriter{header: http.Header{}}
	r := request(idem.WithScope(ctx, user), op, body)
	if handle, ok := o.routes[op]; ok {
		handle(w, r)
	} else {
		notFound(w, r)
	}
	return w.reply()
}

// request is op's HTTP request with body.
func request(ctx context.Context, op Operation, body []byte) *http.Request {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/"+string(op), bytes.NewReader(body))
	if err != nil {
		panic("api: " + err.Error()) // a constant method and a path of our own always parse
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

// replyWriter keeps what a handler answers.
type replyWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *replyWriter) Header() http.Header { return w.header }

func (w *replyWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *replyWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *replyWriter) reply() idem.Response {
	return idem.Response{StatusCode: w.status, Header: w.header, Body: w.body.Bytes()}
}
