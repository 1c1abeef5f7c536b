package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
)

// servePay runs one keyed POST through h as user alice.
func servePay(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
	return rec
}

// A leased-mode handler whose lease cannot be renewed (here its replica's
// pool is saturated) is cancelled before the lease lapses, so a retry that
// re-acquires the key on another replica never runs beside it.
func TestLeasedHandlerIsCancelledWhenItsLeaseLapses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newStore(t) // replica B's store: a roomy pool
	cfg := base.Pool().Config()
	cfg.MaxConns = 1 // replica A: a saturated pool (one connection, held by its handler)
	poolA, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer poolA.Close()

	conf := idem.Config{Mode: idem.ModeLeased, LeaseDuration: 300 * time.Millisecond}
	mwA, err := idem.New(pgstore.New(poolA), conf)
	require.NoError(t, err)
	mwB, err := idem.New(base, conf)
	require.NoError(t, err)

	aCtx := make(chan context.Context, 1)
	releaseA := make(chan struct{})
	handlerA := mwA.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A pending-payment row first: the transaction begins and holds
		// replica A's only connection.
		if _, err := pgstore.DB(r.Context(), poolA).Exec(r.Context(), `SELECT 1`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		aCtx <- r.Context()
		// The bank call: in flight until the test lets it end.
		select {
		case <-r.Context().Done():
		case <-releaseA:
		}
		w.WriteHeader(http.StatusCreated)
	}))
	var aAliveWhenBRan error = context.Canceled
	bRan := false
	handlerB := mwB.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bRan = true
		select {
		case c := <-aCtx:
			aAliveWhenBRan = c.Err()
		default:
		}
		w.WriteHeader(http.StatusCreated)
	}))

	key := "lease-" + t.Name()
	aDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { aDone <- servePay(handlerA, key, `{"amount":100}`) }()
	var ca context.Context
	select {
	case ca = <-aCtx:
		aCtx <- ca // for handler B to inspect
	case <-time.After(time.Minute):
		t.Fatal("handler A never started")
	}

	// Wait until the database says A's lease has lapsed (its renewals
	// cannot get a connection), while A is still running.
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := base.Get(ctx, "alice", key)
		require.NoError(t, err)
		if !rec.LeaseLive {
			break
		}
		require.True(t, time.Now().Before(deadline), "A's lease never lapsed")
		time.Sleep(20 * time.Millisecond)
	}

	// A retry through replica B.
	rb := servePay(handlerB, key, `{"amount":100}`)
	close(releaseA)
	ra := <-aDone
	t.Logf("A answered %d, B answered %d (B ran the handler: %v)", ra.Code, rb.Code, bRan)

	require.False(t, bRan && aAliveWhenBRan == nil,
		"the handler ran a second time (replica B) while the first run (replica A) was still in flight "+
			"and had never been told that its lease had lapsed: the bank is called twice")
}
