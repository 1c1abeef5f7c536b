package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// MinTokenBytes is the shortest admin token New accepts.
const MinTokenBytes = 16

// Defaults of Config.
const (
	DefaultSampleInterval = time.Minute
	DefaultSessionLife    = 8 * time.Hour
)

// Config configures a Console. Store and TokenFile are required; every
// other field documents its default.
type Config struct {
	// Name is the service's name in the pages' titles. Default "idem".
	Name string
	// Store is the key store the service runs on.
	Store store.Store
	// TokenFile holds the admin token, at least MinTokenBytes once trimmed
	// of surrounding space: distinct from every API key, and read once, by
	// New.
	TokenFile string
	// ReplayCacheFunc, if set, reports the service's replay cache
	// (idem.Middleware.ReplayCache), which the overview shows. Default none.
	ReplayCacheFunc func() idem.ReplayCacheStats
	// ResumeFunc, if set, makes one attempt at an abandoned unfinished
	// record now (completer.Completer.Resume): a record's page then offers
	// "retry now". Default none.
	ResumeFunc func(ctx context.Context, u store.Unfinished) idem.Result
	// OutcomeUnknownFunc reports whether a COMPLETED record holds an
	// unknown outcome (idem-gateway's stored 409 problem, say), which the
	// operator resolves by recording the real answer or reopening the key.
	// Default nil: no record does.
	OutcomeUnknownFunc func(*store.Record) bool
	// UnknownOutcomeCode is the stored status code of such records, which
	// the store searches by. Default 409.
	UnknownOutcomeCode int
	// DetailFunc, if set, returns what a record's request produced in the
	// service (a payout and its ledger entries, say), shown on the
	// record's page. Default none.
	DetailFunc func(ctx context.Context, rec *store.Record) ([]Section, error)
	// RunbookURL, if set, is the page that tells the person who resolves
	// an unknown outcome or an unfinished operation what to do (the
	// service's runbook): the overview's lists of them and their record
	// pages link to it. Default none.
	RunbookURL string
	// NoRecoveryPoints says the service keeps no recovery points (no
	// handler runs in phases, idem.Advance): the console hides unfinished
	// operations, recovery points and provider keys, which its records
	// never have. Default false: they are shown.
	NoRecoveryPoints bool
	// SampleInterval is how often Run counts the records by state for the
	// chart of states over time. Default DefaultSampleInterval.
	SampleInterval time.Duration
	// SessionLife is how long a sign-in lasts. Default DefaultSessionLife.
	SessionLife time.Duration
	// Logger logs sign-ins, failed and throttled sign-ins, refusals (CSRF,
	// origin, oversized forms) and actions. Default none.
	Logger *slog.Logger
}

// Section is a part of a record's page that DetailFunc adds: fields, a
// table, or both.
type Section struct {
	Title  string
	Fields []Field
	Table  *Table
}

// Field is one labelled value.
type Field struct{ Name, Value string }

// Table is a small table of text.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Console serves the console's pages. It is an http.Handler; mount it on
// the admin listener.
type Console struct {
	cfg      Config
	token    []byte
	caps     store.Capabilities // the store's, read once in New
	pages    map[string]*template.Template
	mux      *http.ServeMux
	sessions sessions
	throttle signInThrottle
	stats    stats
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// New returns a Console. It fails when the token file cannot be read or
// holds a token too short, and on an invalid Config, never later.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: Config.Store is required")
	}
	if cfg.TokenFile == "" {
		return nil, errors.New("console: Config.TokenFile is required: the console is off without an admin token")
	}
	raw, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("console: admin token: %w", err)
	}
	token := []byte(strings.TrimSpace(string(raw)))
	if len(token) < MinTokenBytes {
		return nil, fmt.Errorf("console: the admin token in %s is shorter than %d bytes", cfg.TokenFile, MinTokenBytes)
	}
	if cfg.Name == "" {
		cfg.Name = "idem"
	}
	if cfg.UnknownOutcomeCode == 0 {
		cfg.UnknownOutcomeCode = http.StatusConflict
	}
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = DefaultSampleInterval
	}
	if cfg.SessionLife == 0 {
		cfg.SessionLife = DefaultSessionLife
	}
	if cfg.SampleInterval < 0 || cfg.SessionLife < 0 {
		return nil, errors.New("console: SampleInterval and SessionLife must be positive")
	}
	c := &Console{cfg: cfg, token: token, sessions: sessions{m: map[string]*session{}}}
	c.caps = cfg.Store.Capabilities()
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range []string{"login", "overview", "keys", "record", "audit", "done"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

func (c *Console) routes() {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.Handle("POST /logout", c.authed(c.logout))
	mux.Handle("GET /{$}", c.authed(c.overview))
	mux.Handle("GET /keys", c.authed(c.keys))
	mux.Handle("GET /key", c.authed(c.record))
	mux.Handle("GET /audit", c.authed(c.auditPage))
	mux.Handle("POST /key/reopen", c.authed(c.action(actionReopen)))
	// Its name until reopen took the glossary's word: a page loaded before
	// an upgrade still posts here. Deprecated; gone in the next release.
	mux.Handle("POST /key/release", c.authed(c.action(actionReopen)))
	mux.Handle("POST /key/answer", c.authed(c.action(actionAnswer)))
	mux.Handle("POST /key/retry", c.authed(c.action(actionRetry)))
	c.mux = mux
}

// ServeHTTP serves the console with its security headers: nothing is
// cached, framed, or run but the console's own stylesheet.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: a form's Origin would be "null"
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// render writes a page; data is the page's, v its common parts.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	v.Service, v.Runbook, v.Phased = c.cfg.Name, c.cfg.RunbookURL, !c.cfg.NoRecoveryPoints
	v.Base = base(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages[name].Execute(w, v); err != nil {
		c.log(r.Context(), slog.LevelError, "console: render", "page", name, "err", err)
	}
}

func (c *Console) log(ctx context.Context, level slog.Level, msg string, attrs ...any) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.Log(ctx, level, msg, attrs...)
	}
}

// base is the path the console is mounted at (what http.StripPrefix took
// off the request's path), with a trailing slash: every link starts with
// it, so the console may sit under any prefix.
func base(r *http.Request) string {
	full, _, _ := strings.Cut(r.RequestURI, "?")
	return strings.TrimSuffix(strings.TrimSuffix(full, strings.TrimPrefix(r.URL.Path, "/")), "/") + "/"
}

// view is what every page's template gets.
type view struct {
	Service, Base, Title string
	Runbook              string // Config.RunbookURL
	Phased               bool   // records may have recovery points
	Session              *session
	Refresh              int // seconds; 0: no meta refresh
	Error, Notice        string
	Data                 any
}
