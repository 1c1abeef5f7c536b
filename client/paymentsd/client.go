// Package paymentsd is a typed client of paymentsd's API (api/openapi.yaml):
// deposits, transactions, balances and rates, over a [client.Transport], so
// that every request that moves money carries an Idempotency-Key and is
// retried safely. Error responses are [*client.Problem] errors.
//
// It is a package of its own, not part of package client, because package
// client serves any idempotent HTTP API: its users should not get
// paymentsd's types, and this package should be free to follow paymentsd's
// API as it grows.
package paymentsd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/idem-dev/idem/client"
)

// Config configures a Client.
type Config struct {
	// BaseURL is paymentsd's address. Default "http://127.0.0.1:8080"
	// (paymentsd's default --addr).
	BaseURL string
	// APIKey is the user's bearer API key. Required.
	APIKey string
	// HTTPClient sends the requests. Default an http.Client whose Transport
	// is a zero client.Transport (its defaults: 4 attempts, 30 s each,
	// back-off from 250 ms to 8 s). A client of your own should retry
	// through a client.Transport too, and bound its calls with a context or
	// its Timeout.
	HTTPClient *http.Client
}

// Client calls one paymentsd as one user. It is safe for concurrent use.
type Client struct {
	base   string
	apiKey string
	hc     *http.Client
}

// New returns a client; a bad Config fails here.
func New(cfg Config) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("paymentsd: Config.APIKey is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://127.0.0.1:8080"
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("paymentsd: Config.BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &client.Transport{}}
	}
	return &Client{base: strings.TrimSuffix(cfg.BaseURL, "/"), apiKey: cfg.APIKey, hc: cfg.HTTPClient}, nil
}

// Response is what a call's answer said besides its body.
type Response struct {
	// Status is the HTTP status.
	Status int
	// Key is the Idempotency-Key sent ("" for a read).
	Key string
	// Replayed says the answer is the stored answer of an earlier request
	// with the same key: nothing moved this time.
	Replayed bool
}

// maxResponseBytes bounds a response body read: paymentsd's answers are
// small, and the idem middleware stores at most 1 MiB.
const maxResponseBytes = 1 << 20

// call sends one request and decodes a 2xx body into out; any other answer
// is a *client.Problem. key is sent as the Idempotency-Key when not "".
func (c *Client) call(ctx context.Context, method, path, key string, in, out any) (Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return Response{}, fmt.Errorf("paymentsd: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return Response{}, fmt.Errorf("paymentsd: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(client.DefaultHeader, key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Response{Key: key}, fmt.Errorf("paymentsd: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	r := Response{Status: resp.StatusCode, Key: key, Replayed: client.Replayed(resp)}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return r, fmt.Errorf("paymentsd: %s %s: read the answer: %w", method, path, err)
	}
	if err := client.ResponseError(resp, b); err != nil {
		return r, fmt.Errorf("paymentsd: %s %s: %w", method, path, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return r, fmt.Errorf("paymentsd: %s %s: decode the answer (status %d): %w", method, path, resp.StatusCode, err)
	}
	return r, nil
}

// keyOr returns key, or a new one for a request that has none.
func keyOr(key string) string {
	if key == "" {
		return client.NewKey()
	}
	return key
}
