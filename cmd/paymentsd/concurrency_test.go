package main_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/require"
)

// TestConcurrency runs the concurrent scenarios against one server per
// store and mode, each with more requests in flight than a user may have by
// default.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		t.Run("OneKey32Requests", func(t *testing.T) {
			t.Parallel()
			testOneKey(t, s)
		})
		t.Run("MixedRun", func(t *testing.T) {
			t.Parallel()
			testMixedRun(t, s)
		})
	}, "--requests-per-scope", "64") // one user races 32 requests at once
}

// testOneKey sends 32 identical requests with one key at once: the money
// moves once, and every 201 is the same response.
func testOneKey(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 100000)
	key := newKey()
	body := `{"source_currency":"USD","target_currency":"EUR","amount":1000}`
	const n = 32
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = try(s, u, http.MethodPost, "/v1/transactions", body, "Idempotency-Key", key)
		})
	}
	close(start)
	wg.Wait()

	var created, executed int
	var first string
	for i, r := range replies {
		require.NoError(t, errs[i])
		switch r.status {
		case http.StatusCreated:
			created++
			if !r.replayed() {
				executed++
			}
			if first == "" {
				first = string(r.body)
			}
			require.Equal(t, first, string(r.body), "every 201 is the one response")
		case http.StatusConflict:
			require.Equal(t, "in-flight", r.problemType(t))
			require.NotEmpty(t, r.header.Get("Retry-After"))
		default:
			t.Fatalf("unexpected reply %s", r)
		}
	}
	require.LessOrEqual(t, executed, 1, "at most one request ran")
	require.Positive(t, created)
	// A retry after the storm gets the same response.
	again := u.post(t, "/v1/transactions", key, body)
	require.Equal(t, http.StatusCreated, again.status)
	require.True(t, again.replayed())
	require.Equal(t, first, string(again.body))

	require.Equal(t, map[string]int64{"USD": 99000, "EUR": 920}, u.balances(t), "moved once")
	require.Equal(t, map[string]int64{"USD": 99000, "EUR": 920}, u.entrySums(t))
	require.Equal(t, int64(1), s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM transactions WHERE user_id = '%s'`, u.id)))
	require.Equal(t, int64(3), s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM ledger_entries WHERE user_id = '%s'`, u.id)), "one credit, one debit and credit")
}

// testMixedRun runs deposits, conversions (some refused for want of
// funds) and replays from several clients at once, and checks that the
// balances are exactly what the responses add up to.
func testMixedRun(t *testing.T, s *server) {
	u := s.newUser(t)
	currencies := []string{"USD", "EUR", "GBP", "JPY", "BRL"}
	const workers, steps = 6, 14
	var (
		mu        sync.Mutex // guards want, amountSeq and conversions
		want                 = map[string]int64{}
		amountSeq int64      = 1000
		converted int
		refused   int
	)
	// Every conversion has an amount of its own, so the minute net never
	// fires between two of them.
	nextAmount := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		amountSeq += 7
		return amountSeq
	}
	type sent struct{ path, key, body string }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var history []sent
			var firstReplies []reply
			for range steps {
				var req sent
				switch k := rng.IntN(10); {
				case k < 3:
					c := currencies[rng.IntN(len(currencies))]
					req = sent{"/v1/deposits", newKey(), fmt.Sprintf(`{"currency":%q,"amount":%d}`, c, 5000+rng.IntN(50000))}
				case k < 8:
					from := currencies[rng.IntN(len(currencies))]
					to := currencies[(1+rng.IntN(len(currencies)-1)+indexOf(currencies, from))%len(currencies)]
					req = sent{"/v1/transactions", newKey(), fmt.Sprintf(`{"source_currency":%q,"target_currency":%q,"amount":%d}`, from, to, nextAmount())}
				default:
					if len(history) == 0 {
						continue
					}
					i := rng.IntN(len(history))
					r, err := try(s, u, http.MethodPost, history[i].path, history[i].body, "Idempotency-Key", history[i].key)
					if err != nil || !r.replayed() || string(r.body) != string(firstReplies[i].body) || r.status != firstReplies[i].status {
						t.Errorf("replay of %v: %v %s, want %s", history[i], err, r, firstReplies[i])
					}
					continue
				}
				r, err := trySettled(s, u, req.path, req.body, req.key)
				if err != nil {
					t.Errorf("%v: %v", req, err)
					continue
				}
				history, firstReplies = append(history, req), append(firstReplies, r)
				mu.Lock()
				switch {
				case r.status == http.StatusCreated && req.path == "/v1/deposits":
					var d struct {
						Currency string `json:"currency"`
						Amount   int64  `json:"amount"`
					}
					_ = json.Unmarshal(r.body, &d)
					want[d.Currency] += d.Amount
				case r.status == http.StatusCreated:
					var tr struct {
						Source    string `json:"source_currency"`
						Target    string `json:"target_currency"`
						Amount    int64  `json:"amount"`
						Converted int64  `json:"converted_amount"`
					}
					_ = json.Unmarshal(r.body, &tr)
					want[tr.Source] -= tr.Amount
					want[tr.Target] += tr.Converted
					converted++
				case r.status == http.StatusPaymentRequired:
					refused++
				default:
					t.Errorf("%v: unexpected %s", req, r)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := u.balances(t)
	for c, v := range got {
		if v == 0 && want[c] == 0 {
			want[c] = 0 // a balance row that was created and emptied
		}
	}
	require.Equal(t, want, got, "balances are exactly what the responses add up to")
	require.Equal(t, got, u.entrySums(t))
	require.Equal(t, int64(converted), s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM transactions WHERE user_id = '%s'`, u.id)))
	t.Logf("%d conversions, %d refused for want of funds", converted, refused)
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// trySettled posts body with key as u, as a client that honours 409
// in-flight does: on a slow machine a fresh key may wait longer for
// SQLite's one writer than the store's bound, and then the answer is
// "retry after Retry-After with the same key", not a final one. It retries
// until the answer is final, for at most patience.
func trySettled(s *server, u *user, path, body, key string) (reply, error) {
	deadline := time.Now().Add(patience)
	for {
		r, err := try(s, u, http.MethodPost, path, body, "Idempotency-Key", key)
		if err != nil || r.status != http.StatusConflict || r.header.Get("Retry-After") == "" || time.Now().After(deadline) {
			return r, err
		}
		wait, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil {
			return r, fmt.Errorf("Retry-After %q: %w", r.header.Get("Retry-After"), err)
		}
		time.Sleep(time.Duration(wait) * time.Second)
	}
}
