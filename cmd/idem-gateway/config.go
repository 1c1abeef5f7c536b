package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idem-dev/idem"
)

// fileSettings is the configuration file's schema (docs/gateway.md has it
// with every default). A setting also given as a flag on the command line
// takes the flag's value.
type fileSettings struct {
	Addr            string             `yaml:"addr"`
	DB              string             `yaml:"db"`
	MetricsAddr     string             `yaml:"metrics_addr"`
	OTLPEndpoint    string             `yaml:"otlp_endpoint"`
	Log             logSettings        `yaml:"log"`
	ShutdownTimeout string             `yaml:"shutdown_timeout"`
	SweepInterval   string             `yaml:"sweep_interval"`
	ReplayCacheMB   *int64             `yaml:"replay_cache_mb"`
	Limits          limitSettings      `yaml:"limits"`
	Upstreams       []upstreamSettings `yaml:"upstreams"`
	Defaults        routeSettings      `yaml:"defaults"`
	Routes          []routeSettings    `yaml:"routes"`
}

type logSettings struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

type limitSettings struct {
	BodyTimeout       string `yaml:"body_timeout"`
	BodyMemoryMB      int64  `yaml:"body_memory_mb"`
	RequestsPerScope  int    `yaml:"requests_per_scope"`
	HeaderTimeout     string `yaml:"header_timeout"`
	MaxHeaderBytes    int    `yaml:"max_header_bytes"`
	MaxConns          int    `yaml:"max_conns"`
	MaxConnsPerSource int    `yaml:"max_conns_per_source"`
	MaxIdleConns      int    `yaml:"max_idle_conns"`
	IdleTimeout       string `yaml:"idle_timeout"`
}

type upstreamSettings struct {
	Name   string `yaml:"name"`
	URL    string `yaml:"url"`
	Prefix string `yaml:"prefix"`
}

// routeSettings is one route, or the defaults every route starts from.
type routeSettings struct {
	Match           string              `yaml:"match"`
	Key             string              `yaml:"key"`
	TTL             string              `yaml:"ttl"`
	Lease           string              `yaml:"lease"`
	UpstreamTimeout string              `yaml:"upstream_timeout"`
	UpstreamDedups  *bool               `yaml:"upstream_dedups"`
	MaxBodyBytes    int64               `yaml:"max_body_bytes"`
	ReplayHeaders   []string            `yaml:"replay_headers"`
	Fingerprint     fingerprintSettings `yaml:"fingerprint"`
	Scope           scopeSettings       `yaml:"scope"`
}

type fingerprintSettings struct {
	Ignore []string `yaml:"ignore"`
	Select []string `yaml:"select"`
}

type scopeSettings struct {
	Header           string `yaml:"header"`
	CredentialHeader string `yaml:"credential_header"`
	TrustedHeader    string `yaml:"trusted_header"`
}

// Route defaults, where the file and the flags say nothing.
const (
	defaultUpstreamTimeout = 30 * time.Second
	defaultScopeHeader     = "Authorization"
)

// readSettings reads and checks the shape of a configuration file: an
// unknown field or a value of the wrong type is an error naming its line.
func readSettings(path string) (*fileSettings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Unwrap(err) // the path is already in the message
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	var s fileSettings
	if err := d.Decode(&s); err != nil {
		return nil, yamlError(err)
	}
	return &s, nil
}

var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// yamlError is the first of a decoder's errors, on one line, in the
// configuration's words.
func yamlError(err error) error {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return errors.New(unknownField.ReplaceAllString(msg, "unknown field \"$1\""))
}

// merged is r with every setting it leaves out taken from def.
func (r routeSettings) merged(def routeSettings) routeSettings {
	pick := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	r.Key, r.TTL, r.Lease, r.UpstreamTimeout = pick(r.Key, def.Key), pick(r.TTL, def.TTL), pick(r.Lease, def.Lease), pick(r.UpstreamTimeout, def.UpstreamTimeout)
	if r.UpstreamDedups == nil {
		r.UpstreamDedups = def.UpstreamDedups
	}
	if r.MaxBodyBytes == 0 {
		r.MaxBodyBytes = def.MaxBodyBytes
	}
	if r.ReplayHeaders == nil {
		r.ReplayHeaders = def.ReplayHeaders
	}
	if r.Fingerprint.Ignore == nil && r.Fingerprint.Select == nil {
		r.Fingerprint = def.Fingerprint
	}
	if r.Scope == (scopeSettings{}) {
		r.Scope = def.Scope
	}
	return r
}

// routeSpec is a route as checked: what building it needs.
type routeSpec struct {
	pattern         pattern
	key             keyMode
	cfg             idem.Config
	upstreamTimeout time.Duration
	dedups          bool
	scope           scopeSource
}

// spec checks a route's settings; field names the route in errors, such
// as "routes[2]".
func (r routeSettings) spec(field string) (routeSpec, error) {
	bad := func(name, format string, args ...any) (routeSpec, error) {
		return routeSpec{}, fmt.Errorf("%s.%s: %s", field, name, fmt.Sprintf(format, args...))
	}
	var s routeSpec
	var err error
	if s.pattern, err = parsePattern(r.Match); err != nil {
		return bad("match", "%v", err)
	}
	switch s.key = keyMode(r.Key); s.key {
	case "":
		s.key = keyRequired
	case keyRequired, keyOptional, keyOff:
	default:
		return bad("key", "%q: want required, optional or off", r.Key)
	}
	durations := []struct {
		name, v string
		into    *time.Duration
		def     time.Duration
	}{
		{"ttl", r.TTL, &s.cfg.TTL, idem.DefaultTTL},
		{"lease", r.Lease, &s.cfg.LeaseDuration, idem.DefaultLeaseDuration},
		{"upstream_timeout", r.UpstreamTimeout, &s.upstreamTimeout, defaultUpstreamTimeout},
	}
	for _, d := range durations {
		if *d.into = d.def; d.v == "" {
			continue
		}
		if *d.into, err = time.ParseDuration(d.v); err != nil || *d.into <= 0 {
			return bad(d.name, "%q: want a positive duration such as 30s, 15m or 48h", d.v)
		}
	}
	if r.MaxBodyBytes < 0 {
		return bad("max_body_bytes", "%d: want a positive number of bytes", r.MaxBodyBytes)
	}
	s.cfg.Mode, s.cfg.MaxRequestBytes = idem.ModeLeased, r.MaxBodyBytes
	s.cfg.ReplayHeaders = r.ReplayHeaders
	if s.cfg.ReplayHeaders == nil {
		s.cfg.ReplayHeaders = []string{idem.ReplayAllHeaders}
	}
	switch f := r.Fingerprint; {
	case f.Ignore != nil && f.Select != nil:
		return bad("fingerprint", "give ignore or select, not both")
	case f.Ignore != nil:
		s.cfg.FingerprintFunc = idem.IgnoreJSONFields(f.Ignore...)
	case f.Select != nil:
		s.cfg.FingerprintFunc = idem.SelectJSONFields(f.Select...)
	}
	if r.UpstreamDedups != nil {
		s.dedups = *r.UpstreamDedups
	}
	// The upstream's effects are outside the gateway's transaction: unless
	// it deduplicates, an attempt that forwarded and stored no answer (its
	// completion failed, it panicked on a cut response, its lease ran out)
	// leaves its key to lapse, and the next one answers outcome-unknown.
	s.cfg.ExternalEffects = !s.dedups
	if s.scope, err = r.Scope.source(); err != nil {
		return bad("scope", "%v", err)
	}
	return s, nil
}

// source checks a scope setting: one header, hashed when it carries a
// credential (Authorization by default, or a credential_header), taken as
// is when trusted. Any other header is refused: a client could send any
// value and be answered from another's stored answers.
func (sc scopeSettings) source() (scopeSource, error) {
	switch h := sc.Header; {
	case given(sc.Header, sc.CredentialHeader, sc.TrustedHeader) > 1:
		return scopeSource{}, errors.New("give one of header, credential_header or trusted_header")
	case sc.TrustedHeader != "":
		return scopeSource{header: http.CanonicalHeaderKey(sc.TrustedHeader), trusted: true}, nil
	case sc.CredentialHeader != "":
		return scopeSource{header: http.CanonicalHeaderKey(sc.CredentialHeader)}, nil
	case h == "" || credentialHeader(h):
		return scopeSource{header: defaultScopeHeader}, nil
	default:
		return scopeSource{}, notCredential("header: "+h, h, "write {credential_header: "+h+"}", "{trusted_header: "+h+"}")
	}
}

// notCredential is the error of a scope header that is not a credential,
// saying what to write instead.
func notCredential(setting, h, credential, trusted string) error {
	return fmt.Errorf("%s is not a credential: anyone may send any %s and be answered from that scope's stored answers; "+
		"if the upstream authenticates requests by it, %s; if a proxy in front sets it (and strips the client's), %s", setting, h, credential, trusted)
}

// given is how many of values are set.
func given(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// checkRoutes refuses two routes that match the same requests equally
// specifically: most specific wins could not choose.
func checkRoutes(specs []routeSpec) error {
	for i, a := range specs {
		for j, b := range specs[:i] {
			if a.pattern.sameSpecificity(b.pattern) {
				return fmt.Errorf("routes[%d].match: %q matches what routes[%d] %q matches, as specifically: remove one", i, a.pattern.text, j, b.pattern.text)
			}
		}
	}
	return nil
}

// parseUpstreams checks the upstreams: http(s) URLs, one per prefix.
func parseUpstreams(us []upstreamSettings) ([]*upstream, error) {
	if len(us) == 0 {
		return nil, errors.New("upstreams: at least one is required")
	}
	var ups []*upstream
	for i, s := range us {
		field := fmt.Sprintf("upstreams[%d]", i)
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s.url: %q: want an http:// or https:// URL", field, s.URL)
		}
		prefix := s.Prefix
		if prefix == "" {
			prefix = "/"
		}
		if !strings.HasPrefix(prefix, "/") {
			return nil, fmt.Errorf("%s.prefix: %q: want a path such as /v1/", field, s.Prefix)
		}
		for j, o := range ups {
			if strings.EqualFold(o.prefix, prefix) {
				return nil, fmt.Errorf("%s.prefix: %q is upstreams[%d]'s too", field, prefix, j)
			}
		}
		name := s.Name
		if name == "" {
			name = u.Host
		}
		ups = append(ups, &upstream{name: name, prefix: prefix, url: u})
	}
	return ups, nil
}
