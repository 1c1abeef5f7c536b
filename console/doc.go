// Package console is the operator's web console of a service built on
// idem: what is in flight, what is unfinished and where, which outcomes
// are unknown, and the fenced, audited actions that settle them.
//
//	c, err := console.New(console.Config{Store: s, TokenFile: "/etc/svc/console-token"})
//	go c.Run(ctx)                       // samples the counts for the charts
//	adminMux.Handle("/console/", http.StripPrefix("/console", c))
//
// Mount it on the admin listener, never on the API's. It is off unless a
// token file is configured: New fails without one. An operator signs in
// with the token (compared in constant time) and a name the audit log
// keeps; every action carries a per-session CSRF token, asks for a reason
// and a confirmation, is fenced like the CLI's (the record's fencing token
// as the page showed it), and is written to the store's audit log
// ([store.Store.BeginAudit]) with the record before and after.
//
// The pages are server-rendered HTML and SVG, with no JavaScript at all;
// the overview refreshes itself with a meta refresh. The capabilities the
// store reports ([store.Capabilities]) decide what is shown: searches need
// Search, actions Resolve and AuditLog, "retry now" a completer; a page
// says what the store does not support.
//
// It depends on the standard library and the core only, so it lives in the
// core module: a service that does not mount it links nothing of it.
package console
