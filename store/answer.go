package store

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// ErrInvalidAction: an operator's action (through Resolve) was refused
// before anything changed: its reason or the answer it records is not one
// a record may hold. The error's text says which and why.
var ErrInvalidAction = errors.New("idem: invalid operator action")

// MaxReasonChars is the most characters an operator action's reason may
// have, at every door (console, CLI, Resolve).
const MaxReasonChars = 500

// Bounds of an answer an operator records.
const (
	maxContentTypeBytes = 255
	maxLocationBytes    = 2048
)

// answerHeaders are the headers an operator may record with an answer:
// those the middleware replays by default (idem.Config.ReplayHeaders).
var answerHeaders = map[string]bool{"Content-Type": true, "Location": true}

// CheckReason checks an operator action's reason: 1 to MaxReasonChars
// characters of UTF-8, no control character but tab and line breaks (it is
// kept in the audit log and printed in log lines). The error wraps
// ErrInvalidAction.
func CheckReason(reason string) error {
	switch n := utf8.RuneCountInString(reason); {
	case strings.TrimSpace(reason) == "":
		return fmt.Errorf("%w: a reason is required (the upstream's log line, a ticket)", ErrInvalidAction)
	case n > MaxReasonChars:
		return fmt.Errorf("%w: the reason has %d characters, more than %d", ErrInvalidAction, n, MaxReasonChars)
	case !utf8.ValidString(reason):
		return fmt.Errorf("%w: the reason is not UTF-8", ErrInvalidAction)
	}
	for _, c := range reason {
		if c != '\t' && c != '\n' && c != '\r' && isControl(c) {
			return fmt.Errorf("%w: the reason holds the control character %U", ErrInvalidAction, c)
		}
	}
	return nil
}

// CheckAnswer checks the answer an operator records for a record
// (Store.ReplaceResponse, through Resolve): a final status (2xx, or
// 4xx but 408 and 429); no header but Content-Type and Location, each with
// one value free of control characters; a Content-Type that parses as a
// media type (mime.ParseMediaType); a Location that is a relative reference
// or an http or https URL, never another scheme (javascript:, data:). Every
// retry of the key gets this answer, so nothing that a browser or a client
// would act on dangerously may enter it. The error wraps ErrInvalidAction.
func CheckAnswer(resp Response) error {
	if s := resp.StatusCode; s < 200 || s > 499 || (s >= 300 && s < 400) || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests {
		return fmt.Errorf("%w: status %d: want a final answer, 2xx or 4xx other than 408 and 429", ErrInvalidAction, s)
	}
	for name, vs := range resp.Header {
		if !answerHeaders[http.CanonicalHeaderKey(name)] {
			return fmt.Errorf("%w: header %q: only Content-Type and Location may be recorded", ErrInvalidAction, name)
		}
		if len(vs) != 1 {
			return fmt.Errorf("%w: header %s: want one value, got %d", ErrInvalidAction, name, len(vs))
		}
		for _, c := range vs[0] {
			if isControl(c) {
				return fmt.Errorf("%w: header %s holds the control character %U (a CR or LF would split the header)", ErrInvalidAction, name, c)
			}
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if len(ct) > maxContentTypeBytes {
			return fmt.Errorf("%w: Content-Type is longer than %d bytes", ErrInvalidAction, maxContentTypeBytes)
		}
		if _, _, err := mime.ParseMediaType(ct); err != nil {
			return fmt.Errorf("%w: Content-Type %q is not a media type: %v", ErrInvalidAction, ct, err)
		}
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		if len(loc) > maxLocationBytes {
			return fmt.Errorf("%w: Location is longer than %d bytes", ErrInvalidAction, maxLocationBytes)
		}
		u, err := url.Parse(loc)
		if err != nil {
			return fmt.Errorf("%w: Location %q is not a URL: %v", ErrInvalidAction, loc, err)
		}
		if s := strings.ToLower(u.Scheme); s != "" && s != "http" && s != "https" {
			return fmt.Errorf("%w: Location %q: want a path or an http or https URL, not the scheme %q", ErrInvalidAction, loc, u.Scheme)
		}
	}
	return nil
}

// isControl reports whether c is a C0 or C1 control character, or DEL.
func isControl(c rune) bool {
	return c < 0x20 || (c >= 0x7f && c < 0xa0)
}
