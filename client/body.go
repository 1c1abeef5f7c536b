package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// rewinder gives each attempt of a request its body.
type rewinder struct {
	first io.ReadCloser                 // the request's own body, for the first attempt
	get   func() (io.ReadCloser, error) // later attempts'; nil when the body cannot be sent again
}

// newRewinder prepares req's body for attempts: GetBody when the request
// has it, else the body buffered up to limit bytes; a longer body is sent
// once as it streams. It takes over req.Body.
func newRewinder(req *http.Request, limit int64) (*rewinder, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return &rewinder{get: func() (io.ReadCloser, error) { return req.Body, nil }}, nil
	case req.GetBody != nil:
		return &rewinder{first: req.Body, get: req.GetBody}, nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		_ = req.Body.Close()
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	if int64(len(b)) > limit {
		return &rewinder{first: readCloser{io.MultiReader(bytes.NewReader(b), req.Body), req.Body}}, nil
	}
	_ = req.Body.Close()
	get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	first, _ := get()
	return &rewinder{first: first, get: get}, nil
}

func (r *rewinder) rewindable() bool { return r.get != nil }

// open returns the body of attempt n.
func (r *rewinder) open(n int) (io.ReadCloser, error) {
	if n == 1 && r.first != nil {
		return r.first, nil
	}
	return r.get()
}

type readCloser struct {
	io.Reader
	io.Closer
}

// bufferedBody is a response body read whole.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (bufferedBody) Close() error { return nil }

// readResponse reads resp's body whole when it fits in limit bytes
// (limit < 0: never), and ends the attempt's context (cancel) when the
// body is read or closed. A body cut mid-way is an error.
func readResponse(resp *http.Response, limit int64, cancel context.CancelFunc) (buffered bool, err error) {
	orig := resp.Body
	stream := func(r io.Reader) {
		resp.Body = readCloser{r, closeFunc(func() error { defer cancel(); return orig.Close() })}
	}
	if limit < 0 {
		stream(orig)
		return false, nil
	}
	b, err := io.ReadAll(io.LimitReader(orig, limit+1))
	if err != nil {
		_ = orig.Close()
		cancel()
		return false, fmt.Errorf("status %d, body cut: %w", resp.StatusCode, err)
	}
	if int64(len(b)) > limit {
		stream(io.MultiReader(bytes.NewReader(b), orig))
		return false, nil
	}
	_ = orig.Close()
	cancel()
	resp.Body = &bufferedBody{bytes.NewReader(b), b}
	return true, nil
}

type closeFunc func() error

func (f closeFunc) Close() error { return f() }
