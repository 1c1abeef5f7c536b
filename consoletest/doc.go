// Package consoletest drives the operator console (package console) in a
// real headless Chromium, against real paymentsd and idem-gateway
// processes on PostgreSQL and SQLite. It is a module of its own, so that
// the browser driver never enters a library user's module graph; make
// test-console runs it, and its tests fail, never skip, without a browser
// or a database.
package consoletest
