package idemotel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idem-dev/idem/idemotel"
	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/pgstore"
	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/sweeper"
)

// The sweeper's batches on a real PostgreSQL, measured: the records
// deleted, each batch by result (ok, busy while another process holds the
// sweep lock, error) and the time of each batch that ran. The sweeper
// makes no spans.
func TestSweepMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, 4)
	_, err := pgstore.Migrate(ctx, pool)
	require.NoError(t, err)
	st := pgstore.New(pool)
	for i := range 3 {
		c := store.Claim{
			Scope: "alice", Key: fmt.Sprintf("k%d", i), Token: uuid.NewString(), Lease: time.Minute, TTL: time.Millisecond,
			Fingerprint: store.Fingerprint{Version: 1, Method: "POST", Path: "/v1/payments", Hash: make([]byte, 32)},
		}
		_, inserted, err := st.Insert(ctx, c)
		require.NoError(t, err)
		require.True(t, inserted)
		require.NoError(t, st.Complete(ctx, c.Attempt(), store.Response{StatusCode: 201, Body: []byte(`{}`)}))
	}
	// Past retention by the database's clock.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		rec, err := st.Get(ctx, "alice", "k2")
		require.NoError(t, err)
		if rec.Expired {
			break
		}
		require.True(t, time.Now().Before(deadline), "the records never expired")
	}

	reader := sdkmetric.NewManualReader()
	tel, err := idemotel.New(idemotel.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	sw, err := sweeper.New(st, sweeper.Config{BatchSize: 2, Pause: -1, ObserveFunc: tel.ObserveSweep})
	require.NoError(t, err)

	n, err := sw.Once(ctx) // a batch of 2, then a short one of 1
	require.NoError(t, err)
	require.Equal(t, 3, n)

	// Another process sweeps: it holds the key table's sweep lock.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('idem.sweep'), hashtext('idempotency_keys'::regclass::oid::text))`)
	require.NoError(t, err)
	_, err = sw.Once(ctx)
	require.ErrorIs(t, err, store.ErrSweepBusy)
	require.NoError(t, tx.Rollback(ctx))

	pool.Close()
	_, err = sw.Once(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrSweepBusy)

	got := collect(t, reader)
	deleted, ok := got["idem.sweep.deleted"].(metricdata.Sum[int64])
	require.True(t, ok, "idem.sweep.deleted is an int64 sum")
	var total int64
	for _, dp := range deleted.DataPoints {
		total += dp.Value
	}
	require.Equal(t, int64(3), total)

	batches, ok := got["idem.sweep.batches"].(metricdata.Sum[int64])
	require.True(t, ok, "idem.sweep.batches is an int64 sum")
	byResult := map[string]int64{}
	for _, dp := range batches.DataPoints {
		result, _ := dp.Attributes.Value("idem.result")
		byResult[result.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"ok": 2, "busy": 1, "error": 1}, byResult)

	durations, ok := got["idem.sweep.batch.duration"].(metricdata.Histogram[float64])
	require.True(t, ok, "idem.sweep.batch.duration is a histogram")
	var timed uint64
	for _, dp := range durations.DataPoints {
		timed += dp.Count
	}
	require.Equal(t, uint64(3), timed, "the two batches that deleted and the one that failed; a busy one did not run")
}
