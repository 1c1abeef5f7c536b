// Package routers holds no code: its tests show that net/http routers,
// http.ServeMux and chi, need no adapter. idem.Middleware.Require is a
// func(http.Handler) http.Handler; the route label is the router's pattern
// with the method ("POST /v1/payments/{id}"), whether the middleware wraps
// one route or the whole router. They also wire echo v4, which module
// idemecho (echo v5) does not take, in a few lines around
// echo.WrapMiddleware. They run the adapters' conformance flows (package
// adaptertest) on PostgreSQL and SQLite. A module of its own, so that no
// user of the core downloads chi or echo.
package routers
