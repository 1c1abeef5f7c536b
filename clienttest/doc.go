// Package clienttest runs the client recipes of docs/clients.md with the
// real libraries (Python's requests with urllib3's Retry, Node's axios with
// axios-retry, Go's hashicorp/go-retryablehttp and idem's own client
// package) against real paymentsd and idem-gateway processes on
// PostgreSQL: a double tap (two concurrent sends of one operation, one
// effect) and an upstream killed mid-request (the client gets the
// outcome-unknown answer once and does not send it again). It is a module
// of its own, so that no retry library enters a library user's module
// graph; make test-clients runs it, and its tests fail, never skip, without
// a database, Python's requests or Node's packages.
package clienttest
