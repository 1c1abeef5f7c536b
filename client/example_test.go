package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/idem-dev/idem/client"
)

// A server that fails the first attempt with a 503, then answers; the
// retry carries the same key. The client sees the answer and whether it was
// a replay, and a problem response becomes an error.
func Example() {
	var mu sync.Mutex
	keys := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		keys[key]++
		switch {
		case strings.Contains(r.URL.Path, "overdraw"):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusPaymentRequired)
			_, _ = io.WriteString(w, `{"type":"https://example.com/problems#insufficient-funds","title":"Insufficient funds","status":402}`)
		case keys[key] == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"d1"}`)
		}
	}))
	defer srv.Close()

	hc := &http.Client{Transport: &client.Transport{
		BaseDelay: 10 * time.Millisecond, // the default is 250 ms
		AttemptFunc: func(a client.Attempt) {
			fmt.Printf("attempt %d: %d, retry %v\n", a.N, a.Status, a.Retry)
		},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds every attempt and wait
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/deposits", strings.NewReader(`{"amount":100}`))
	resp, err := hc.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "replayed:", client.Replayed(resp), "keys:", len(keys))

	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/overdraw", strings.NewReader(`{"amount":100}`))
	resp, err = hc.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var p *client.Problem
	if err := client.ResponseError(resp, body); errors.As(err, &p) {
		fmt.Println(p.Status, p.Title)
	}
	// Output:
	// attempt 1: 503, retry true
	// attempt 2: 201, retry false
	// 201 {"id":"d1"} replayed: true keys: 1
	// attempt 1: 402, retry false
	// 402 Insufficient funds
}
