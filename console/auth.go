package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const sessionCookie = "idem_console"

// session is one operator's sign-in.
type session struct {
	id      string
	Name    string // who, as the operator named themselves
	CSRF    string // the token every action's form carries
	expires time.Time
}

// sessions are the live sign-ins.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session // guarded by mu; by id
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(name string, life time.Duration) *session {
	ss := &session{id: randomToken(), Name: name, CSRF: randomToken(), expires: time.Now().Add(life)}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for id, old := range s.m {
		if now.After(old.expires) {
			delete(s.m, id)
		}
	}
	s.m[ss.id] = ss
	return ss
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil || time.Now().After(ss.expires) {
		delete(s.m, id)
		return nil
	}
	return ss
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// equal compares secrets in constant time, whatever their lengths.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// sameOrigin reports whether a form was posted from the console's own
// pages: a browser names the page's origin in Origin (or, failing that,
// marks the request same-origin in Sec-Fetch-Site). A request with neither
// (curl) passes here; the CSRF token still guards its action.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "" || site == "same-origin" || site == "none"
}

type authedHandler func(w http.ResponseWriter, r *http.Request, s *session)

// authed serves h to a signed-in operator; anyone else is sent to the
// sign-in page (GET) or refused (401). A POST must also come from the
// console's pages and carry the session's CSRF token (403 otherwise).
func (c *Console) authed(h authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s *session
		if ck, err := r.Cookie(sessionCookie); err == nil {
			s = c.sessions.get(ck.Value)
		}
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, base(r)+"login", http.StatusSeeOther)
				return
			}
			c.log(r.Context(), slog.LevelWarn, "console: refused: not signed in", "path", r.URL.Path, "remote", r.RemoteAddr)
			c.refuse(w, r, http.StatusUnauthorized, "Sign in first: this action needs an operator's session.")
			return
		}
		if r.Method == http.MethodPost {
			if !c.readForm(w, r, maxActionForm) {
				return
			}
			if !sameOrigin(r) || !equal(r.PostFormValue("csrf"), s.CSRF) {
				c.log(r.Context(), slog.LevelWarn, "console: refused: bad CSRF token or origin", "path", r.URL.Path, "operator", s.Name, "remote", r.RemoteAddr)
				c.refuse(w, r, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong, or it was not sent from the console. Nothing changed.")
				return
			}
		}
		h(w, r, s)
	})
}

// The largest forms the console reads: an action's (a recorded answer's
// body included) and the sign-in's.
const (
	maxActionForm = 1 << 20
	maxSignInForm = 64 << 10
)

// readForm reads r's form, at most limit bytes, before anything looks at
// its fields: a larger one is refused with 413, an unreadable one with
// 400, and false is returned; nothing changes.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request, limit int64) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	err := r.ParseForm() // ParseMultipartForm alone drops its error
	if err == nil {
		if err = r.ParseMultipartForm(limit); err == nil || errors.Is(err, http.ErrNotMultipart) {
			return true
		}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		c.log(r.Context(), slog.LevelWarn, "console: refused: form too large", "path", r.URL.Path, "remote", r.RemoteAddr, "limit", limit)
		c.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("Refused: the form is larger than %d KiB. Nothing changed.", limit>>10))
		return false
	}
	c.refuse(w, r, http.StatusBadRequest, "Refused: the form could not be read. Nothing changed.")
	return false
}

func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "done", &view{Title: http.StatusText(status), Error: msg})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", &view{Title: "Sign in"})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r, maxSignInForm) {
		return
	}
	addr := clientAddr(r)
	if wait, ok := c.throttle.take(addr, time.Now()); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		c.log(r.Context(), slog.LevelWarn, "console: sign-in throttled", "remote", r.RemoteAddr, "retry_after_s", secs)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.render(w, r, http.StatusTooManyRequests, "login", &view{Title: "Sign in",
			Error: fmt.Sprintf("Too many failed sign-ins: try again in %d s. The admin token was not checked.", secs)})
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if !sameOrigin(r) || !equal(r.PostFormValue("token"), string(c.token)) || name == "" || len(name) > 100 {
		c.log(r.Context(), slog.LevelWarn, "console: sign-in refused", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusUnauthorized, "login", &view{Title: "Sign in", Error: "Wrong admin token, or no name given."})
		return
	}
	c.throttle.refund(addr, time.Now())
	s := c.sessions.create(name, c.cfg.SessionLife)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: s.id, Path: base(r), HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(c.cfg.SessionLife / time.Second),
	})
	c.log(r.Context(), slog.LevelInfo, "console: signed in", "operator", name, "remote", r.RemoteAddr)
	http.Redirect(w, r, base(r), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.drop(s.id)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: base(r), MaxAge: -1, HttpOnly: true})
	http.Redirect(w, r, base(r)+"login", http.StatusSeeOther)
}
