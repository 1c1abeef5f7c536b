package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/pgstore"
)

// Once the middleware has committed or rolled back the request's
// transaction, begun or not, work the handler left behind
// (context.WithoutCancel(r.Context()) for an audit record, say) cannot
// begin it again: its statement fails instead of holding a connection idle
// in transaction for good.
func TestAmbientTxRefusesStatementsAfterRequestEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newStore(t)
	_, err := base.Pool().Exec(ctx, `CREATE TABLE audit (what text)`)
	require.NoError(t, err)

	// The middleware's pool, tagged so that the leaked backend can be ended
	// when the test is over (else the schema's drop waits on its locks).
	// It is deliberately not closed: Close would wait for the leaked
	// connection for ever.
	app := "audit-" + uuid.NewString()[:8]
	cfg := base.Pool().Config()
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = base.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
	})

	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeLeased})
	require.NoError(t, err)
	auditDone := make(chan error, 1)
	requestOver := make(chan struct{})
	h := mw.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actx := context.WithoutCancel(r.Context())
		go func() {
			<-requestOver
			_, err := pgstore.DB(actx, pool).Exec(actx, `INSERT INTO audit VALUES ('payment requested')`)
			auditDone <- err
		}()
		w.WriteHeader(http.StatusAccepted)
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(idem.WithScope(req.Context(), "alice")))
	require.Equal(t, http.StatusAccepted, rec.Code)
	close(requestOver)
	auditErr := <-auditDone
	// The connection goes back to the pool once the request's transaction
	// has ended; a minute is the bound, not the expectation.
	deadline := time.Now().Add(time.Minute)
	for pool.Stat().AcquiredConns() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	var audited int
	require.NoError(t, base.Pool().QueryRow(ctx, `SELECT count(*) FROM audit`).Scan(&audited))
	held := pool.Stat().AcquiredConns()
	t.Logf("audit Exec error: %v; audit rows visible: %d; connections still checked out: %d", auditErr, audited, held)
	require.False(t, auditErr == nil && audited == 0, "the write reported success and was never committed")
	require.Zero(t, held, "a connection is left checked out, idle in transaction, for good")
}
