package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// causeAttemptLapsed is why an outcome is unknown (the cause member of
// the outcome-unknown problem) when no call of this attempt made it so,
// beside idem.UnknownCause's: an earlier attempt's lease lapsed, maybe
// after forwarding: its gateway died or stalled, the upstream's answer was
// cut after its headers, or its completion could not be written.
const causeAttemptLapsed = "attempt-lapsed"

// unknownMarkKey marks a request's context with the flag its
// outcome-unknown answer sets, for the request log line.
type unknownMarkKey struct{}

// startRequest is the routes' idem.Config.StartFunc: start's (tracing),
// and the request log line, which says outcome=unknown for a request that
// got the outcome-unknown answer, not executed.
func (g *gateway) startRequest(start func(context.Context) (context.Context, func(idem.Event))) func(context.Context) (context.Context, func(idem.Event)) {
	return func(ctx context.Context) (context.Context, func(idem.Event)) {
		unknown := new(atomic.Bool)
		ctx = context.WithValue(ctx, unknownMarkKey{}, unknown)
		var end func(idem.Event)
		if start != nil {
			ctx, end = start(ctx)
		}
		return ctx, func(e idem.Event) {
			g.logRequest(e, unknown.Load())
			if end != nil {
				end(e)
			}
		}
	}
}

// markUnknown records, for the request log line, that r got the
// outcome-unknown answer.
func markUnknown(r *http.Request) {
	if m, ok := r.Context().Value(unknownMarkKey{}).(*atomic.Bool); ok {
		m.Store(true)
	}
}

// unknownDetail is what an operator needs of a key to find out what the
// upstream did: the key forwarded to it, the upstream that serves the
// request's path (by the configured upstreams; "" when none are known),
// and why the outcome is unknown (the stored problem's cause; "" when the
// record holds no outcome-unknown answer, or one stored before causes
// were).
type unknownDetail struct {
	ForwardedKey string
	Upstream     string
	Cause        string
}

func detailOf(rec *store.Record, ups []*upstream) unknownDetail {
	d := unknownDetail{ForwardedKey: derivedKey(rec.Scope, rec.Key)}
	path, _, _ := strings.Cut(rec.Fingerprint.Path, "?")
	if up := upstreamFor(ups, &http.Request{URL: &url.URL{Path: path}}); up != nil {
		d.Upstream = up.name
	}
	if outcomeUnknown(rec) {
		var p struct {
			Cause string `json:"cause"`
		}
		if json.Unmarshal(rec.Response.Body, &p) == nil {
			d.Cause = p.Cause
		}
	}
	return d
}

// causeText says what a cause means, for the console.
var causeText = map[string]string{
	idem.CauseTimeout:  "timeout: the upstream sent no answer within the route's upstream timeout",
	idem.CauseReset:    "reset: the connection closed before an answer",
	idem.CauseNoAnswer: "no answer: the call failed after the request may have been sent",
	causeAttemptLapsed: "attempt lapsed: an earlier attempt's lease ran out (its gateway died or stalled, the answer was cut after its headers, or it could not be stored)",
}
