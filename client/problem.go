package client

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
)

// Problem is an error response as a Go error: an RFC 9457 problem details
// object, or, for an error response in another format, one built from its
// status (type "about:blank", the status text as its title). [ResponseError]
// makes one; use errors.As to reach it:
//
//	var p *client.Problem
//	if errors.As(err, &p) && p.Status == http.StatusPaymentRequired { … }
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Replayed says the response was the stored answer of an earlier
	// request with the same key (see [Replayed]).
	Replayed bool `json:"-"`
	// Body is the response body as received, for a problem's extension
	// members.
	Body []byte `json:"-"`
}

func (p *Problem) Error() string {
	s := strconv.Itoa(p.Status) + " " + p.Title
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	if p.Type != "" && p.Type != "about:blank" {
		s += " (" + p.Type + ")"
	}
	return s
}

// ResponseError returns nil for a response below 400, and otherwise the
// error it stands for, given its body: a *Problem whose status is the
// response's, whatever the body says.
func ResponseError(resp *http.Response, body []byte) error {
	if resp.StatusCode < 400 {
		return nil
	}
	p := &Problem{}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == "application/problem+json" {
		_ = json.Unmarshal(body, p) // a malformed problem keeps the fallbacks below
	}
	p.Status, p.Replayed, p.Body = resp.StatusCode, Replayed(resp), body
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	return p
}
