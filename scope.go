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
