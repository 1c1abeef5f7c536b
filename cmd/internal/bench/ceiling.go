package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The ceiling is the least SQL one fresh idempotent conversion needs, sent
// the cheapest way: one pipelined round trip, one commit. It authenticates
// the API key, writes the transaction, moves both balances (their CHECK
// refuses an overdraft), appends both ledger entries and records the key
// COMPLETED with the stored response in one insert, as paymentsd's
// atomic-deferred mode does, with none of the reads and checks a general
// handler makes.
const (
	ceilingAuth        = `SELECT user_id FROM api_keys WHERE key_hash = $1`
	ceilingTransaction = `
INSERT INTO transactions (id, user_id, source_currency, target_currency, amount, converted_amount, rate, status, idempotency_key)
VALUES ($1, $2, 'USD', 'EUR', $3, $4, 0.92, 'COMPLETED', $5)`
	ceilingBalance = `UPDATE balances SET amount = amount + $3, updated_at = now() WHERE user_id = $1 AND currency = $2`
	ceilingEntries = `
INSERT INTO ledger_entries (user_id, currency, amount, transaction_id)
VALUES ($1, 'USD', $2, $4), ($1, 'EUR', $3, $4)`
	ceilingKey = `
INSERT INTO idempotency_keys
       (scope, idempotency_key, request_method, request_path, request_hash, fingerprint_version,
        status, attempts, fencing_token, claimed_at, lease_expires_at, created_at, expires_at,
        response_code, response_headers, response_body, resource_type, resource_id)
VALUES ($1, $2, 'POST', '/v1/transactions', $3, 1, 'COMPLETED', 1, $4, now(), now(), now(), now() + interval '48 hours',
        201, $5, $6, 'transactions', $7)
ON CONFLICT (scope, idempotency_key) DO NOTHING`
)

// newCeilingPool opens the ceiling's conc connections to db up front, so
// that no measured window pays for a connection's start.
func newCeilingPool(ctx context.Context, db *database, conc int) (*pgxpool.Pool, error) {
	cfg := db.pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = int32(conc), int32(conc)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ceiling pool: %w", err)
	}
	conns := make([]*pgxpool.Conn, 0, conc)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range conc {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("ceiling pool: %w", err)
		}
		conns = append(conns, c)
	}
	return pool, nil
}

func runCeiling(ctx context.Context, v *variant, wl *workload, conc int, w window) (*tally, error) {
	return closedLoop(ctx, conc, w, func(r *rand.Rand, t *tally) error {
		rq := wl.fresh(r, v)
		t0 := time.Now()
		err := ceilingRequest(ctx, v.pool, rq)
		t1 := time.Now()
		o := outcome{status: 201}
		if err != nil {
			o = outcome{err: err}
		}
		t.add(w, t0, t1, o, err == nil)
		return nil
	})
}

func ceilingRequest(ctx context.Context, pool *pgxpool.Pool, rq request) error {
	amount := rq.amount
	id := uuid.NewString()
	token := uuid.NewString()
	converted := amount * 92 / 100
	hash := sha256.Sum256(rq.body)
	headers, _ := json.Marshal(map[string][]string{"Content-Type": {"application/json"}, "Location": {"/v1/transactions/" + id}})
	body := fmt.Appendf(nil, `{"id":%q,"source_currency":"USD","target_currency":"EUR","amount":%d,"converted_amount":%d,"rate":"0.92","status":"COMPLETED","created_at":%q}`,
		id, amount, converted, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
	uid := rq.user.id
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(ceilingAuth, rq.user.hash)
	b.Queue(ceilingTransaction, id, uid, amount, converted, rq.key)
	b.Queue(ceilingBalance, uid, "EUR", converted) // lock order: by currency
	b.Queue(ceilingBalance, uid, "USD", -amount)
	b.Queue(ceilingEntries, uid, -amount, converted, id)
	b.Queue(ceilingKey, uid, rq.key, hash[:], token, headers, body, id)
	b.Queue("COMMIT")
	br := pool.SendBatch(ctx, b)
	for i := range b.Len() {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("ceiling statement %d: %w", i, err)
		}
		// Every key is new, so the key's insert always inserts; a conflict is
		// a bug of the workload (the pipeline has already gone on to commit).
		if i == 6 && tag.RowsAffected() != 1 {
			_ = br.Close()
			return fmt.Errorf("ceiling: key %s already claimed", rq.key)
		}
	}
	return br.Close()
}
