package idem

import "context"

type scopeKey struct{}

// WithScope returns a copy of ctx that says whose request it is (a user, a
// tenant, an API client): its scope, by which its key is scoped. An
// authentication middleware calls it; the default Config.ScopeFunc reads it
// back.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// ScopeFromContext returns the scope set by WithScope, or "".
func ScopeFromContext(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}

// attemptKey marks the handler's context with its heldAttempt: one value
// for all the middleware tells the handler.
type attemptKey struct{}

// heldAttempt is what the handler's context carries of the attempt that
// holds its key.
type heldAttempt struct {
	key    string
	lapsed bool      // a lapsed attempt held the key before (PriorAttemptLapsed)
	rec    *recovery // the recovery-point state; nil outside leased mode on a store with recovery points
}

func attemptFrom(ctx context.Context) *heldAttempt {
	a, _ := ctx.Value(attemptKey{}).(*heldAttempt)
	return a
}

// KeyFromContext returns the idempotency key of the request the handler is
// serving, as the middleware parsed it (unquoted), or "" outside an
// idempotent request. Pass it on as the downstream idempotency key when the
// handler calls a bank or a card network: if the key's completion is ever
// lost, a retry then cannot move money twice there either.
func KeyFromContext(ctx context.Context) string {
	if a := attemptFrom(ctx); a != nil {
		return a.key
	}
	return ""
}

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
	a := attemptFrom(ctx)
	return a != nil && a.lapsed
}
