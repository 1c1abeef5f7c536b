package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// keysShow runs `paymentsd keys show` and decodes its JSON.
func keysShow(t *testing.T, s *server, u *user, key string) (map[string]any, string, int) {
	t.Helper()
	out, errOut, code := runCLI(t, env(), "keys", "show", "--db", s.db, "--scope", u.id, "--key", key)
	if code != 0 {
		return nil, errOut, code
	}
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v, errOut, code
}

// waitExpired waits, by the store's own clock, until the records of the
// user's keys are past their retention.
func waitExpired(t *testing.T, s *server, u *user, keys ...string) {
	t.Helper()
	for _, key := range keys {
		waitFor(t, func() bool {
			v, errOut, code := keysShow(t, s, u, key)
			require.Zero(t, code, errOut)
			return v["expired"] == true
		}, "the record of %s did not expire", key)
	}
}

func TestKeysShow(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		u := s.newUser(t)
		key := newKey()
		require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":500}`).status)
		v, errOut, code := keysShow(t, s, u, key)
		require.Zero(t, code, errOut)
		require.Equal(t, "COMPLETED", v["status"])
		require.Equal(t, float64(201), v["response_code"])
		require.Equal(t, float64(1), v["attempts"])
		require.Equal(t, "POST /v1/deposits", v["request"])
		require.Equal(t, u.id, v["scope"])
		require.Equal(t, false, v["lease_live"])
		require.Equal(t, v["lease_expires_at"], v["lock_expires_at"], "the deprecated names, one release more")
		require.Equal(t, v["scope"], v["user_id"])
		require.Equal(t, v["lease_live"], v["lock_live"])
		require.Equal(t, false, v["expired"])
		created, err := time.Parse(time.RFC3339Nano, v["created_at"].(string))
		require.NoError(t, err)
		completed, err := time.Parse(time.RFC3339Nano, v["completed_at"].(string))
		require.NoError(t, err)
		require.False(t, completed.Before(created), "completed at %v, before its creation at %v", completed, created)
		require.Contains(t, v["resource"], "deposits/")
		require.NotContains(t, v, "response_body", "never a body")

		_, errOut, code = keysShow(t, s, u, "never-used")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `no record for key "never-used"`)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)

		_, errOut, code = runCLI(t, env(), "keys", "show", "--db", s.db, "--key", key)
		require.Equal(t, 2, code, "a missing flag is a usage error")
		require.Contains(t, errOut, "--scope and --key are required")
	})
}

// Records past their retention are deleted by `paymentsd keys sweep`, and by
// the sweeper inside serve; the key then works again for a new request.
func TestSweep(t *testing.T) {
	t.Parallel()
	t.Run("OneShot", func(t *testing.T) {
		t.Parallel()
		each(t, sweepOnce, "--idempotency-ttl", "1s", "--sweep-interval", "0")
	})
	t.Run("InServe", func(t *testing.T) {
		t.Parallel()
		each(t, sweepInServe, "--idempotency-ttl", "1s", "--sweep-interval", "200ms")
	})
}

func sweepOnce(t *testing.T, s *server) {
	u := s.newUser(t)
	key := newKey()
	require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":500}`).status)
	require.Equal(t, int64(1), u.storedKeys(t))
	waitExpired(t, s, u, key)
	out, errOut, code := runCLI(t, env(), "keys", "sweep", "--db", s.db)
	require.Zero(t, code, errOut)
	require.JSONEq(t, `{"deleted":1}`, out)
	require.Zero(t, u.storedKeys(t))
	_, _, code = keysShow(t, s, u, key)
	require.Equal(t, 1, code, "the swept record is gone")
	r := u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":700}`)
	require.Equal(t, http.StatusCreated, r.status, "a swept key is free: %s", r)
}

func sweepInServe(t *testing.T, s *server) {
	u := s.newUser(t)
	require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":500}`).status)
	waitFor(t, func() bool { return u.storedKeys(t) == 0 }, "the sweeper in serve did not delete the expired record")
	// The batch counts its deletes once it has returned, after its commit
	// (and, on MySQL, after the release of its sweep lock).
	waitFor(t, func() bool { return strings.Contains(scrape(t, s), "idem_sweep_deleted_total 1") }, "the sweeper's delete was never counted")
}

func scrape(t *testing.T, s *server) string {
	t.Helper()
	resp, err := http.Get(s.metrics)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		u := s.newUser(t)
		key := newKey()
		for range 2 {
			require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":500}`).status)
		}
		require.Equal(t, http.StatusBadRequest, u.post(t, "/v1/deposits", "a b", `{"currency":"USD","amount":500}`).status)
		body := scrape(t, s)
		for _, want := range []string{
			`idem_requests_total{outcome="executed",route="POST /v1/deposits"} 1`,
			`idem_requests_total{outcome="replayed",route="POST /v1/deposits"} 1`,
			`idem_requests_total{outcome="invalid_key",route="POST /v1/deposits"} 1`,
			`idem_store_operation_duration_seconds_bucket{`,
		} {
			require.Contains(t, body, want)
		}
		require.NotContains(t, body, key, "no key in metrics")
		require.NotContains(t, body, u.id, "no user in metrics")
		// PostgreSQL's round trips are counted (make bench reads them).
		trips := regexp.MustCompile(`(?m)^paymentsd_postgres_round_trips_total (\d+)$`).FindStringSubmatch(body)
		if s.store != "postgres" {
			require.Nil(t, trips, "round trips are PostgreSQL's")
			return
		}
		require.NotNil(t, trips, "no round trips in metrics")
		n, err := strconv.Atoi(trips[1])
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 3, "at least a round trip per request")
	})
}

// TestKeysShowPendingPayout: for a payout whose bank outcome is unknown
// (the bank is down: 202, pending), keys show prints the recovery point,
// the key paymentsd sent the bank, the one to ask bankd for, and the
// payout with why its outcome is unknown; once the bank is back and the
// retry pays it, the payout is paid and the cause gone.
func TestKeysShowPendingPayout(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			bankAddr := freeAddr(t)
			s := startServer(t, newDB(t, store), payoutArgs(t, "http://"+bankAddr, secretFile(t), time.Hour)...)
			u := s.newUser(t)
			require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":5000}`).status)
			const key = "payout-bank-down"
			const body = `{"currency":"USD","amount":2500,"destination":"acct-1"}`
			r := u.post(t, "/v1/payouts", key, body)
			require.Equal(t, http.StatusAccepted, r.status, "the bank is down: %s", r)
			v, errOut, code := keysShow(t, s, u, key)
			require.Zero(t, code, errOut)
			require.Equal(t, "outcome-unknown", v["recovery_point"])
			require.NotContains(t, v, "completed_at", "not completed")
			bankKey := sqlValue[string](t, s, `SELECT bank_key FROM payouts`)
			require.Equal(t, map[string]any{"bank": bankKey}, v["provider_keys"])
			payoutID := r.json(t)["id"]
			require.Equal(t, map[string]any{"id": payoutID, "status": "pending", "bank_outcome_cause": "no-answer"}, v["payout"],
				"the connection was refused: no answer")

			startBank(t, filepath.Join(t.TempDir(), "bank.db"), "--addr", bankAddr)
			r = u.post(t, "/v1/payouts", key, body)
			require.Equal(t, http.StatusCreated, r.status, "the bank is back: %s", r)
			v, errOut, code = keysShow(t, s, u, key)
			require.Zero(t, code, errOut)
			require.Equal(t, map[string]any{"id": payoutID, "status": "paid"}, v["payout"], "paid: no cause")
			require.Contains(t, v, "completed_at", "completed by the retry")
		})
	}
}

// TestPayoutOutcomeCause: why a payout's bank outcome is unknown, as keys
// show prints it, for each way a real bankd leaves it unknown. The causes
// do not depend on the store (the conformance suite of each ledger checks
// the column), so SQLite alone runs them.
func TestPayoutOutcomeCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, faults, cause string
		args                []string
	}{
		{"Reset", "reset-after=1", "reset", nil},
		{"BankError", "error-before=1", "bank-error", nil},
		{"Timeout", "hang=1", "timeout", []string{"--bank-timeout", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bank := startBank(t, filepath.Join(t.TempDir(), "bank.db"), "--faults", tc.faults)
			args := append(payoutArgs(t, bank.url, secretFile(t), time.Hour), tc.args...)
			s := startServer(t, newDB(t, "sqlite"), args...)
			u := s.newUser(t)
			require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", newKey(), `{"currency":"USD","amount":5000}`).status)
			const key = "payout-unknown"
			r := u.post(t, "/v1/payouts", key, `{"currency":"USD","amount":2500,"destination":"acct-1"}`)
			require.Equal(t, http.StatusAccepted, r.status, "bankd's fault %s: %s", tc.faults, r)
			v, errOut, code := keysShow(t, s, u, key)
			require.Zero(t, code, errOut)
			require.Equal(t, map[string]any{"id": r.json(t)["id"], "status": "pending", "bank_outcome_cause": tc.cause}, v["payout"])
		})
	}
}
