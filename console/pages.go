package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// The states the console names. A record's State is one of them.
const (
	stateInFlight  = "in flight"
	stateAbandoned = "lease expired"
	stateCompleted = "completed"
	stateFailed    = "failed"
	stateUnfinish  = "unfinished"
	stateUnknown   = "outcome unknown"
)

// searchStates are the states a search can select, by their form value.
var searchStates = []struct{ Value, Label string }{
	{"", "any state"}, {"processing", "in flight (processing)"}, {"completed", "completed"}, {"failed", "failed"},
	{"unfinished", "unfinished"}, {"unknown", "outcome unknown"},
}

// bodyShown is the most of a stored body a record's page shows.
const bodyShown = 64 << 10

var funcs = template.FuncMap{
	"age": func(now, t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return age(now.Sub(t))
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
	},
	"ms": func(d time.Duration) string { return d.Round(time.Millisecond / 10).String() },
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"stateClass": func(s string) string { return strings.ReplaceAll(s, " ", "-") },
	"rowsOf": func(v *view, now time.Time, rows []row, empty string) any {
		return struct {
			Base   string
			Now    time.Time
			Rows   []row
			Empty  string
			Phased bool
		}{v.Base, now, rows, empty, v.Phased}
	},
	"query": func(scope, key string) string { return keyQuery(store.KeyRef{Scope: scope, Key: key}) },
	"num": func(c store.KeyCount) string {
		if c.Exact {
			return fmt.Sprint(c.N)
		}
		return fmt.Sprintf("≈%d", c.N)
	},
}

// age spells a duration as an operator reads it: 3d 4h, 2h 5m, 4m 10s, 7s.
func age(d time.Duration) string {
	if d < 0 {
		return "in " + age(-d)
	}
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// row is a record as a list shows it.
type row struct {
	store.Record
	State string
}

func (c *Console) state(rec *store.Record) string {
	switch {
	case rec.Status == store.StatusCompleted && c.cfg.OutcomeUnknownFunc != nil && c.cfg.OutcomeUnknownFunc(rec):
		return stateUnknown
	case rec.Status == store.StatusCompleted:
		return stateCompleted
	case rec.RecoveryPoint != "":
		return stateUnfinish
	case rec.Status == store.StatusProcessing && rec.LeaseLive:
		return stateInFlight
	case rec.Status == store.StatusProcessing:
		return stateAbandoned
	}
	return stateFailed
}

func (c *Console) rows(recs []store.Record) []row {
	rs := make([]row, len(recs))
	for i := range recs {
		rs[i] = row{Record: recs[i], State: c.state(&recs[i])}
	}
	return rs
}

// unknownQuery selects the records that may hold an unknown outcome;
// OutcomeUnknownFunc then tells.
func (c *Console) unknownQuery(limit int) store.KeyQuery {
	return store.KeyQuery{Status: store.StatusCompleted, ResponseCode: c.cfg.UnknownOutcomeCode, Limit: limit}
}

// unknown lists the records whose outcome is unknown, newest first.
func (c *Console) unknown(r *http.Request, limit int) ([]store.Record, error) {
	if c.cfg.OutcomeUnknownFunc == nil {
		return nil, nil
	}
	recs, err := c.cfg.Store.ListKeys(r.Context(), c.unknownQuery(limit))
	var out []store.Record
	for i := range recs {
		if c.cfg.OutcomeUnknownFunc(&recs[i]) {
			out = append(out, recs[i])
		}
	}
	return out, err
}

type overviewData struct {
	Now                    time.Time
	Supported              bool
	Counts                 store.KeyCounts
	Points                 []pointCount
	UnfinishedN            int64
	Unfinished, Unknown    []row
	UnknownSupported       bool
	UnknownMore            bool
	Cache                  *idem.ReplayCacheStats
	Sweeps                 []sweep
	StateCharts            []template.HTML
	ReplayChart, Unknown24 template.HTML
	Audit                  []store.AuditEntry
}

type pointCount struct {
	Point string
	N     int64
}

// overviewList is how many unfinished and unknown records the overview
// lists; the unknown outcomes chart reads up to overviewChart.
const overviewList, overviewChart = 10, 500

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	d := overviewData{Now: time.Now().UTC(), Supported: c.caps.Search, UnknownSupported: c.cfg.OutcomeUnknownFunc != nil}
	v := &view{Title: "Overview", Session: s, Refresh: 30, Data: &d}
	if c.cfg.ReplayCacheFunc != nil {
		st := c.cfg.ReplayCacheFunc()
		d.Cache = &st
	}
	var errs []string
	if d.Supported {
		ctx := r.Context()
		counts, err := c.sample(ctx)
		if err != nil {
			errs = append(errs, err.Error())
		}
		d.Counts = counts
		if !counts.Now.IsZero() {
			d.Now = counts.Now
		}
		for p, n := range counts.Unfinished {
			d.UnfinishedN += n
			d.Points = append(d.Points, pointCount{p, n})
		}
		sort.Slice(d.Points, func(i, j int) bool { return d.Points[i].Point < d.Points[j].Point })
		unfinished, err := c.cfg.Store.ListKeys(ctx, store.KeyQuery{Unfinished: true, Limit: overviewChart})
		if err != nil {
			errs = append(errs, err.Error())
		}
		unknown, err := c.unknown(r, overviewChart)
		if err != nil {
			errs = append(errs, err.Error())
		}
		var created []time.Time
		for _, rec := range append(append([]store.Record(nil), unfinished...), unknown...) {
			created = append(created, rec.CreatedAt)
		}
		d.Unknown24 = unknownChart(created, d.Now)
		d.Unfinished = c.rows(unfinished[:min(len(unfinished), overviewList)])
		d.Unknown = c.rows(unknown[:min(len(unknown), overviewList)])
		d.UnknownMore = len(unknown) > overviewList
	}
	samples, minutes, sweeps := c.snapshot()
	d.StateCharts, d.ReplayChart = stateCharts(samples), replayChart(minutes)
	for i := len(sweeps) - 1; i >= 0 && len(d.Sweeps) < 5; i-- {
		d.Sweeps = append(d.Sweeps, sweeps[i])
	}
	if c.caps.AuditLog {
		a, err := c.cfg.Store.ListAudit(r.Context(), store.KeyRef{}, 5)
		if err != nil {
			errs = append(errs, err.Error())
		}
		d.Audit = a
	}
	v.Error = strings.Join(errs, "; ")
	c.render(w, r, http.StatusOK, "overview", v)
}

type searchData struct {
	Now       time.Time
	Supported bool
	Form      url.Values
	States    any
	Rows      []row
	Limit     int
	Next      template.URL // the next page, "" for none
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request, s *session) {
	f := r.URL.Query()
	d := searchData{Now: time.Now().UTC(), Supported: c.caps.Search, Form: f, States: searchStates, Limit: store.DefaultKeyQueryLimit}
	v := &view{Title: "Search keys", Session: s, Data: &d}
	if !d.Supported {
		c.render(w, r, http.StatusOK, "keys", v)
		return
	}
	q := store.KeyQuery{Scope: strings.TrimSpace(f.Get("scope")), Key: f.Get("key"), PathPrefix: strings.TrimSpace(f.Get("route")), Limit: d.Limit}
	if o := strings.TrimSpace(f.Get("older")); o != "" {
		dur, err := time.ParseDuration(o)
		if err != nil || dur < 0 {
			v.Error = fmt.Sprintf("Older than %q: want a duration such as 90s, 15m or 2h.", o)
			c.render(w, r, http.StatusBadRequest, "keys", v)
			return
		}
		q.CreatedBefore = time.Now().Add(-dur)
	}
	if b := f.Get("before"); b != "" {
		if t, err := time.Parse(time.RFC3339Nano, b); err == nil && (q.CreatedBefore.IsZero() || t.Before(q.CreatedBefore)) {
			q.CreatedBefore = t
		}
	}
	unknownOnly := false
	switch f.Get("state") {
	case "processing":
		q.Status = store.StatusProcessing
	case "completed":
		q.Status = store.StatusCompleted
	case "failed":
		q.Status = store.StatusFailed
	case "unfinished":
		q.Unfinished = true
	case "unknown":
		if c.cfg.OutcomeUnknownFunc == nil {
			v.Notice = "This service keeps no unknown outcomes as answers; its unknown outcomes are unfinished records."
			q.Unfinished = true
			break
		}
		unknownOnly = true
		q.Status, q.ResponseCode = store.StatusCompleted, c.cfg.UnknownOutcomeCode
	}
	recs, err := c.cfg.Store.ListKeys(r.Context(), q)
	if err != nil {
		v.Error = err.Error()
	}
	if len(recs) == q.Limit && !q.Unfinished {
		next := url.Values{}
		for k, vs := range f {
			next[k] = vs
		}
		next.Set("before", recs[len(recs)-1].CreatedAt.UTC().Format(time.RFC3339Nano))
		d.Next = template.URL(base(r) + "keys?" + next.Encode())
	}
	if unknownOnly {
		kept := recs[:0]
		for i := range recs {
			if c.cfg.OutcomeUnknownFunc(&recs[i]) {
				kept = append(kept, recs[i])
			}
		}
		recs = kept
	}
	d.Rows = c.rows(recs)
	c.render(w, r, http.StatusOK, "keys", v)
}

type recordData struct {
	Now           time.Time
	Row           row
	Scope         string
	ProviderKeys  []Field
	Headers       []Field
	Body          string
	BodyNote      string
	Sections      []Section
	Audit         []store.AuditEntry
	CanResolve    bool // reopen, answer: an unknown outcome
	CanRetry      bool // an abandoned unfinished record and a completer
	RetryWhyNot   string
	ResolveWhyNot string
	CSRF          string
}

func (c *Console) record(w http.ResponseWriter, r *http.Request, s *session) {
	scope, key := r.URL.Query().Get("scope"), r.URL.Query().Get("key")
	v := &view{Title: "Key " + key, Session: s}
	ctx := r.Context()
	rec, err := c.cfg.Store.Get(ctx, scope, key)
	if errors.Is(err, store.ErrNotFound) {
		v.Error = fmt.Sprintf("No record for key %q in scope %q: never used, or swept after its retention.", key, scope)
		c.render(w, r, http.StatusNotFound, "done", v)
		return
	}
	if err != nil {
		v.Error = err.Error()
		c.render(w, r, http.StatusServiceUnavailable, "done", v)
		return
	}
	d := recordData{Now: time.Now().UTC(), Row: row{Record: *rec, State: c.state(rec)}, CSRF: s.CSRF}
	v.Data = &d
	if done := r.URL.Query().Get("done"); done != "" {
		v.Notice = "Done: " + done + ". The audit log below has the entry."
	}
	var errs []string
	if c.caps.Search {
		pk, err := c.cfg.Store.ProviderKeys(ctx, scope, key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err.Error())
		}
		for _, p := range sortedKeys(pk) {
			d.ProviderKeys = append(d.ProviderKeys, Field{p, pk[p]})
		}
	}
	if resp := rec.Response; resp != nil {
		for _, h := range sortedKeys(resp.Header) {
			d.Headers = append(d.Headers, Field{h, strings.Join(resp.Header[h], ", ")})
		}
		d.Body, d.BodyNote = showBody(resp.Body)
	}
	if c.cfg.DetailFunc != nil {
		secs, err := c.cfg.DetailFunc(ctx, rec)
		if err != nil {
			errs = append(errs, err.Error())
		}
		d.Sections = secs
	}
	if c.caps.AuditLog {
		if d.Audit, err = c.cfg.Store.ListAudit(ctx, store.KeyRef{Scope: scope, Key: key}, 50); err != nil {
			errs = append(errs, err.Error())
		}
	}
	d.CanResolve, d.ResolveWhyNot = c.canResolve(&d.Row)
	d.CanRetry, d.RetryWhyNot = c.canRetry(&d.Row)
	v.Error = strings.Join(errs, "; ")
	c.render(w, r, http.StatusOK, "record", v)
}

func (c *Console) canResolve(rw *row) (bool, string) {
	switch {
	case rw.State != stateUnknown:
		return false, ""
	case !c.caps.Resolve || !c.caps.AuditLog:
		return false, "This store cannot resolve keys with an audit log (it needs store.Capabilities.Resolve and AuditLog)."
	}
	return true, ""
}

func (c *Console) canRetry(rw *row) (bool, string) {
	switch {
	case rw.RecoveryPoint == "" || rw.Status == store.StatusCompleted:
		return false, ""
	case c.cfg.ResumeFunc == nil:
		return false, "This service runs no completer here: nothing can retry the operation now."
	case !c.caps.AuditLog:
		return false, "This store keeps no audit log (store.Capabilities.AuditLog): actions are off."
	case rw.Status == store.StatusProcessing && rw.LeaseLive:
		return false, "An attempt holds the key now (its lease is live); retry once it has run out."
	}
	return true, ""
}

// showBody returns a stored body as a page shows it: JSON indented, text
// as it is, cut at bodyShown; binary only as its size.
func showBody(b []byte) (string, string) {
	if len(b) == 0 {
		return "", "empty body"
	}
	note := fmt.Sprintf("%d bytes", len(b))
	if len(b) > bodyShown {
		note += fmt.Sprintf(", the first %d shown", bodyShown)
	}
	var ind bytes.Buffer
	if len(b) <= bodyShown && json.Indent(&ind, b, "", "  ") == nil {
		return ind.String(), note + ", JSON, indented"
	}
	cut := b[:min(len(b), bodyShown)]
	if !utf8.Valid(cut) {
		return "", note + " of binary data, not shown"
	}
	return string(cut), note
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	v := &view{Title: "Audit log", Session: s}
	if !c.caps.AuditLog {
		v.Notice = "This store keeps no audit log (store.Capabilities.AuditLog): the console's actions are off."
		c.render(w, r, http.StatusOK, "audit", v)
		return
	}
	es, err := c.cfg.Store.ListAudit(r.Context(), store.KeyRef{}, 200)
	if err != nil {
		c.log(r.Context(), slog.LevelError, "console: list audit", "err", err)
		v.Error = err.Error()
	}
	v.Data = es
	c.render(w, r, http.StatusOK, "audit", v)
}

func keyQuery(ref store.KeyRef) string {
	return url.Values{"scope": {ref.Scope}, "key": {ref.Key}}.Encode()
}
