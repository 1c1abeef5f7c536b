package idem

import "context"

type scopeKey struct{}

// WithScope returns a copy of ctx that says which user the request belongs
// to. An authentication middleware calls it; the default Config.ScopeFunc
// reads it back.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeFromContext returns the scope set by WithScope, or "".
func ScopeFromContext(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}

type keyKey struct{}

// KeyFromContext returns the idempotency key of the request the handler is
// serving, as the middleware parsed it (unquoted), or "" outside an
// idempotent request. Pass it on as the downstream idempotency key when the
// handler calls a bank or a card network: if the key's completion is ever
// lost, a retry then cannot move money twice there either.
func KeyFromContext(ctx context.Context) string {
	k, _ := ctx.Value(keyKey{}).(string)
	return k
}

type lapsedKey struct{}

// PriorAttemptLapsed reports whether the request the handler is serving
// took its key over from an earlier attempt whose lease ran out before it
// completed or freed the key: a process killed or stalled mid-request.
// That attempt's database writes never committed, but what it did outside
// the database (a call to a bank, or to another service) may have
// happened. A handler whose effects lie outside the database checks it
// before acting again, unless the service it calls deduplicates on the key
// it is passed (KeyFromContext). It is false outside an idempotent request
// and when the earlier attempt freed the key itself.
func PriorAttemptLapsed(ctx context.Context) bool {
	l, _ := ctx.Value(lapsedKey{}).(bool)
	return l
}
