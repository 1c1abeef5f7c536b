package idem_test

import (
	"testing"

	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/storetest"
)

// BenchmarkRequestPath measures the middleware's own request path on
// memstore: a handler that decodes the body and answers 201 with a small
// JSON document, as make bench's trivial handler does without its INSERT.
func BenchmarkRequestPath(b *testing.B) {
	storetest.BenchmarkRequestPath(b, storetest.BenchmarkConfig{
		NewStore: func(*testing.B) store.Store { return memstore.New() },
		Handler:  storetest.BenchmarkHandler(nil),
	})
}

// BenchmarkReplayPath measures the middleware's replay path without a
// replay cache on memstore: one read of the key's record a retry.
func BenchmarkReplayPath(b *testing.B) {
	storetest.BenchmarkReplayPath(b, storetest.BenchmarkConfig{
		NewStore: func(*testing.B) store.Store { return memstore.New() },
		Handler:  storetest.BenchmarkHandler(nil),
	})
}
