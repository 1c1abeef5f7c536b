package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idem-dev/idem/store"
)

// Mode is how a request holds its key while the handler runs.
type Mode int

const (
	// ModeLeased commits the PROCESSING claim before the handler runs and
	// holds the key with a renewed, fenced lease of bounded life. Choose it when the handler
	// calls anything outside the store's database (a bank, a card network):
	// the claim must survive that call. It costs one more commit per request.
	ModeLeased Mode = iota
	// ModeAtomic runs the claim, the handler's writes and the completion in
	// one transaction: the transaction is the lock. A duplicate waits for the
	// first request to end, then replays it. Choose it when the handler only
	// writes to the store's database.
	ModeAtomic
	// ModeAtomicDeferred is ModeAtomic with the claim moved to the
	// completion: one insert records the key with its response, pipelined
	// with the COMMIT. A concurrent duplicate's handler runs too and its
	// writes are rolled back, so use it only for handlers that touch
	// nothing outside the store's database. New refuses it on a store
	// that cannot defer a claim ([store.Capabilities.DeferredClaim]:
	// pgstore, sqlstore and memstore can, sqlitestore cannot).
	// docs/modes.md weighs it.
	ModeAtomicDeferred
)

// atomic reports whether m runs the request in one transaction.
func (m Mode) atomic() bool { return m == ModeAtomic || m == ModeAtomicDeferred }

func (m Mode) valid() bool { return m == ModeLeased || m.atomic() }

func (m Mode) String() string {
	switch m {
	case ModeLeased:
		return "leased"
	case ModeAtomic:
		return "atomic"
	case ModeAtomicDeferred:
		return "atomic-deferred"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses a Mode's String: "leased", "atomic" or
// "atomic-deferred".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeLeased, ModeAtomic, ModeAtomicDeferred} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("idem: unknown mode %q (want leased, atomic or atomic-deferred)", s)
}

// Config configures the middleware. Its zero value is valid; every field
// documents its default.
type Config struct {
	// Mode is how a request holds its key. Default ModeLeased, which is safe
	// for any handler; use ModeAtomic for handlers that only write to the
	// store's database.
	Mode Mode

	// Header is the request header that carries the key. Default
	// "Idempotency-Key".
	Header string

	// ScopeFunc says whose request it is (a user, a tenant, an API client):
	// its scope; every key is scoped by it. A request whose scope is empty is rejected with 401 and nothing is
	// stored. Default: the scope that an authentication middleware put in the
	// context with WithScope.
	ScopeFunc func(*http.Request) string

	// LeaseDuration is the lease of a leased-mode claim. A live request
	// renews it every third of its length; a crashed one's lease runs out
	// after it and a retry re-acquires the key. Default 30s.
	LeaseDuration time.Duration

	// ExternalEffects says that a leased-mode handler acts outside the
	// store's transaction: it forwards the request to another service (as
	// idem-gateway does) or calls a provider without recovery points. An
	// attempt whose handler may have acted but whose answer is not stored
	// (the completion failed, the lease was lost or passed its maximum
	// life, the handler panicked) then does not free its key: the key stays
	// held until its lease runs out, and the attempt that takes it over
	// runs with [PriorAttemptLapsed] set, so the handler can answer that the
	// outcome is unknown instead of acting again. Only the handler's own
	// retriable answer (5xx, 408, 429) frees the key. Needs ModeLeased.
	// Default false: every effect is a write in the transaction, which a
	// failed completion rolls back, so the key is freed for a retry at once.
	ExternalEffects bool

	// MaxLeaseLife bounds how long a leased-mode handler may hold its key,
	// renewals included. Past it the handler's context is cancelled with
	// [ErrLeaseMaxLife], renewal stops, and whatever the handler answers is
	// not stored (the client gets 409 lease-lost); once the lease runs out a
	// retry may take the key. At least [Config.LeaseDuration]. Default 5m.
	MaxLeaseLife time.Duration

	// WaitTimeout bounds how long an atomic-mode duplicate waits for the
	// request that holds its key before answering 409. Default 5s.
	WaitTimeout time.Duration

	// RetryAfter is the Retry-After of a 409 for a request in flight, rounded
	// up to whole seconds. In-flight requests usually end in milliseconds, so
	// it is short whatever the lease. Default 1s.
	RetryAfter time.Duration

	// TTL is how long a record binds its key: from its creation, and at
	// least this long after its last attempt began, so a retry near the end
	// of retention is still replayed. After it the key may be used afresh,
	// unless an attempt still holds a live lease. Default 48h.
	TTL time.Duration

	// ReplayHeaders are the response headers stored and replayed. Set-Cookie
	// and authentication headers are never replayed, even when listed. "*"
	// replays every header but those and the ones about the connection
	// (Connection, Date, Content-Length, …), as a proxy does.
	// Default Content-Type, Location and [HeaderShouldRetry].
	ReplayHeaders []string

	// MaxRequestBytes is the largest request body accepted; larger → 413.
	// Default 1 MiB.
	MaxRequestBytes int64

	// MaxResponseBytes is the largest response body stored. A larger one is
	// replaced, for the first caller and every retry alike, by a stored
	// problem response saying so; the request is never run again. Default
	// 1 MiB.
	MaxResponseBytes int64

	// ReplayCacheBytes bounds the replay cache: the COMPLETED records this
	// process wrote or replayed, kept in memory up to about this many bytes
	// (least recently used out first), so that a retry it has seen is
	// answered with no round trip and a fresh key is claimed with no read
	// first. docs/modes.md says why it is safe. An outcome-unknown answer
	// ([store.AwaitsOperator]), which an operator may still change, is
	// never kept. Each New has a cache of its own, which the middlewares
	// WithMode and With return share. Default [DefaultReplayCacheBytes];
	// negative: no cache, every request reads its key's record first.
	ReplayCacheBytes int64

	// ReplayCacheableFunc, when set, says whether a COMPLETED response may
	// be kept in the replay cache. The cache is safe because a COMPLETED
	// record never changes; a response an operator may still change
	// through [store.Store.ReplaceResponse] must not be cached, or a process would
	// replay it after the change. The outcome-unknown answer never is; a
	// service whose operators resolve other answers (console's
	// OutcomeUnknownFunc) refuses them here. Default nil: every other
	// COMPLETED response may be.
	ReplayCacheableFunc func(store.Response) bool

	// StoreTimeout bounds the writes that finish a request (completion,
	// freeing the key), which run even when the client has gone. Default 10s.
	StoreTimeout time.Duration

	// ProblemTypeBase prefixes the type URI of every problem response.
	// Default "https://github.com/idem-dev/idem/blob/main/docs/problems.md#".
	ProblemTypeBase string

	// ObserveFunc, when set, is called once for every request that carries
	// a key, after its response is decided: the hook for metrics, logs and
	// traces. It must not block. Default none.
	ObserveFunc func(Event)

	// ProviderKeySecret is the secret of ProviderKey, the idempotency key a
	// leased-mode handler sends to a downstream (a bank); at least
	// MinProviderKeySecret bytes. A key once derived is recorded with the
	// operation's recovery point, so the secret may change at any time
	// (docs/payouts.md, "Rotating the secret"). Default none: ProviderKey
	// fails with ErrNoProviderKeySecret.
	ProviderKeySecret []byte

	// TraceFunc, when set, is called around every store operation the
	// middleware runs: the hook for store latency metrics and tracing spans
	// (see TraceFunc). It must not block. Default none, and then the
	// middleware calls the store directly, at no cost.
	TraceFunc TraceFunc

	// StartFunc, when set, is called as each request that carries a key
	// starts, with its context: the hook for a tracing span around the
	// whole request. The store operations (TraceFunc) and the handler run
	// with the context it returns; the function it returns is called with
	// the request's Event when it ends, after ObserveFunc. It must not
	// block. Default none.
	StartFunc func(ctx context.Context) (context.Context, func(Event))

	// FingerprintFunc, when set, chooses what of a request body identifies
	// it: it returns the bytes fingerprinted in place of the body (a JSON
	// body stays JSON and is canonicalised), so that fields a client
	// changes between retries, such as its own timestamp, do not make a
	// retry a 422 (IgnoreJSONFields, SelectJSONFields). The method, path and
	// query always count. An error answers 400. Changing it makes retries of
	// requests stored before the change 422s until their TTL runs out.
	// Default none: the whole body counts.
	FingerprintFunc func(r *http.Request, body []byte) ([]byte, error)

	// ValidateKeyFunc, when set, checks a key after ParseKey accepted it
	// (UUIDKey: "must be a UUID"); an error answers 400 key-invalid, its
	// text in the detail. Default none.
	ValidateKeyFunc func(key string) error

	// ProblemFunc, when set, renders the responses the middleware answers
	// itself (400, 401, 409, 413, 422, 503, and the stored 500 of a
	// response too large): for teams with an error format of their own.
	// The middleware adds Retry-After where the problem has one. Keep the
	// status: clients decide whether to retry by it. Default: RFC 9457
	// problem details (docs/problems.md).
	ProblemFunc func(Problem) Response
}

// RouteOptions was the limits one route sets otherwise (Middleware.With),
// six fields of Config under the same names.
//
// Deprecated: Middleware.With takes a Config, whose zero fields keep the
// middleware's values; RouteOptions is that Config, and goes in the next
// release.
type RouteOptions = Config

// Defaults of Config.
const (
	DefaultHeader           = "Idempotency-Key"
	DefaultLeaseDuration    = 30 * time.Second
	DefaultMaxLeaseLife     = 5 * time.Minute
	DefaultWaitTimeout      = 5 * time.Second
	DefaultRetryAfter       = time.Second
	DefaultTTL              = 48 * time.Hour
	DefaultMaxRequestBytes  = 1 << 20
	DefaultMaxResponseBytes = 1 << 20
	DefaultStoreTimeout     = 10 * time.Second
	DefaultReplayCacheBytes = 32 << 20
	DefaultProblemTypeBase  = "https://github.com/idem-dev/idem/blob/main/docs/problems.md#"
)

// ReplayAllHeaders is the Config.ReplayHeaders entry that replays every
// header a proxy would pass on.
const ReplayAllHeaders = "*"

// notReplayedByAll are the headers "*" leaves out besides neverReplayed:
// those about the connection or the moment, never the answer.
var notReplayedByAll = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Te": true, "Trailer": true,
	"Upgrade": true, "Proxy-Connection": true, "Date": true, "Content-Length": true, "Idempotent-Replayed": true,
}

// neverReplayed are headers that would leak a session or credentials to
// whoever retries.
var neverReplayed = map[string]bool{
	"Set-Cookie":          true,
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Www-Authenticate":    true,
	"Proxy-Authenticate":  true,
	"Cookie":              true,
}

func (c Config) withDefaults() (Config, error) {
	if !c.Mode.valid() {
		return c, fmt.Errorf("idem: unknown mode %d", int(c.Mode))
	}
	if c.ExternalEffects && c.Mode != ModeLeased {
		return c, fmt.Errorf("idem: ExternalEffects needs ModeLeased, not %s: an atomic claim commits with the handler's writes, so nothing outside them is guarded", c.Mode)
	}
	if c.Header == "" {
		c.Header = DefaultHeader
	}
	c.Header = http.CanonicalHeaderKey(c.Header)
	if c.ScopeFunc == nil {
		c.ScopeFunc = func(r *http.Request) string { return ScopeFromContext(r.Context()) }
	}
	var errs []error
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"LeaseDuration", &c.LeaseDuration, DefaultLeaseDuration},
		{"MaxLeaseLife", &c.MaxLeaseLife, DefaultMaxLeaseLife},
		{"WaitTimeout", &c.WaitTimeout, DefaultWaitTimeout},
		{"RetryAfter", &c.RetryAfter, DefaultRetryAfter},
		{"TTL", &c.TTL, DefaultTTL},
		{"StoreTimeout", &c.StoreTimeout, DefaultStoreTimeout},
	}
	for _, d := range durations {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("idem: %s must be positive, got %v", d.name, *d.v))
		}
	}
	if c.LeaseDuration > 0 && c.LeaseDuration < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("idem: LeaseDuration %v is too short to renew (minimum 100ms)", c.LeaseDuration))
	}
	if c.MaxLeaseLife > 0 && c.MaxLeaseLife < c.LeaseDuration {
		errs = append(errs, fmt.Errorf("idem: MaxLeaseLife %v is shorter than LeaseDuration %v", c.MaxLeaseLife, c.LeaseDuration))
	}
	sizes := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"MaxRequestBytes", &c.MaxRequestBytes, DefaultMaxRequestBytes},
		{"MaxResponseBytes", &c.MaxResponseBytes, DefaultMaxResponseBytes},
	}
	for _, s := range sizes {
		switch {
		case *s.v == 0:
			*s.v = s.def
		case *s.v < 0:
			errs = append(errs, fmt.Errorf("idem: %s must be positive, got %d", s.name, *s.v))
		}
	}
	if c.ReplayCacheBytes == 0 {
		c.ReplayCacheBytes = DefaultReplayCacheBytes // negative stays: no cache
	}
	if n := len(c.ProviderKeySecret); n > 0 && n < MinProviderKeySecret {
		errs = append(errs, fmt.Errorf("idem: ProviderKeySecret is %d bytes; the minimum is %d", n, MinProviderKeySecret))
	}
	if c.ReplayHeaders == nil {
		c.ReplayHeaders = []string{"Content-Type", "Location", HeaderShouldRetry}
	}
	replay := make([]string, 0, len(c.ReplayHeaders))
	for _, h := range c.ReplayHeaders {
		h = http.CanonicalHeaderKey(strings.TrimSpace(h))
		if h == "" || neverReplayed[h] {
			continue
		}
		replay = append(replay, h)
	}
	c.ReplayHeaders = replay
	if c.ProblemTypeBase == "" {
		c.ProblemTypeBase = DefaultProblemTypeBase
	}
	return c, errors.Join(errs...)
}
