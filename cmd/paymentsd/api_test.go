package main_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
)

// TestAPI runs every API behaviour against one server per store and mode.
func TestAPI(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *server) {
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, s *server)
		}{
			{"Unauthorized", testUnauthorized},
			{"Deposit", testDeposit},
			{"Transaction", testTransaction},
			{"InvalidRequestsAreStored", testInvalidStored},
			{"InsufficientFunds", testInsufficientFunds},
			{"KeyErrors", testKeyErrors},
			{"BadInput", testBadInput},
			{"InFlight", testInFlight},
			{"MinuteNet", testMinuteNet},
			{"Rates", testRates},
			{"Routes", testRoutes},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, s)
			})
		}
	})
}

func testUnauthorized(t *testing.T, s *server) {
	u := s.newUser(t)
	bogus := &user{s: s, apiKey: "sk_" + strings.Repeat("A", 43)}
	key := newKey()
	body := `{"currency":"USD","amount":100}`
	for _, c := range []struct {
		name    string
		u       *user
		headers []string
		invalid bool // an API key was sent, but is unknown
	}{
		{"NoHeader", nil, nil, false},
		{"UnknownKey", bogus, nil, true},
		{"OtherScheme", nil, []string{"Authorization", "Basic dXNlcjpwYXNz"}, false},
		{"EmptyBearer", nil, []string{"Authorization", "Bearer "}, false},
		{"TwoHeaders", nil, []string{"Authorization", "Bearer " + u.apiKey, "Authorization", "Bearer " + u.apiKey}, false},
	} {
		for _, route := range []struct{ method, path, body string }{
			{"POST", "/v1/deposits", body}, {"POST", "/v1/transactions", body},
			{"GET", "/v1/balances", ""}, {"GET", "/v1/rates", ""},
			{"GET", "/v1/transactions/" + uuid.NewString(), ""}, {"GET", "/v1/no-such-route", ""},
		} {
			// With an Idempotency-Key and without: authentication comes
			// first either way.
			for _, k := range []string{key, ""} {
				r := do(t, s, c.u, route.method, route.path, route.body, append([]string{"Idempotency-Key", k}, c.headers...)...)
				require.Equal(t, http.StatusUnauthorized, r.status, "%s %s %s: %s", c.name, route.method, route.path, r)
				require.Equal(t, "unauthorized", r.problemType(t))
				www := r.header.Get("WWW-Authenticate")
				require.True(t, strings.HasPrefix(www, "Bearer "), www)
				require.Equal(t, c.invalid, strings.Contains(www, `error="invalid_token"`), www)
			}
		}
	}
	require.Zero(t, s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM idempotency_keys WHERE idempotency_key = '%s'`, key)), "nothing stored")
	require.Empty(t, u.balances(t))
}

func testDeposit(t *testing.T, s *server) {
	u := s.newUser(t)
	key := newKey()
	first := u.post(t, "/v1/deposits", key, `{"currency":"USD","amount":10000}`)
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	require.False(t, first.replayed())
	d := first.json(t)
	require.Equal(t, []string{"amount", "created_at", "currency", "id"}, keys(d))
	require.Equal(t, "USD", d["currency"])
	require.Equal(t, float64(10000), d["amount"])
	id := d["id"].(string)
	require.NoError(t, uuid.Validate(id))
	created, err := time.Parse(time.RFC3339Nano, d["created_at"].(string))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(d["created_at"].(string), "Z"), "UTC")
	require.WithinDuration(t, time.Now(), created, time.Minute)
	require.Equal(t, "/v1/deposits/"+id, first.header.Get("Location"))

	// A retry, and one whose body differs only in spelling, replay it.
	for _, body := range []string{`{"currency":"USD","amount":10000}`, "{ \"amount\": 10000,\n \"currency\": \"USD\" }"} {
		again := u.post(t, "/v1/deposits", key, body)
		require.Equal(t, first.status, again.status)
		require.Equal(t, string(first.body), string(again.body), "byte-identical")
		require.True(t, again.replayed())
		require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))
		require.Equal(t, "application/json", again.header.Get("Content-Type"))
	}
	got := u.get(t, "/v1/deposits/"+id)
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, string(first.body), string(got.body))
	require.Equal(t, map[string]int64{"USD": 10000}, u.balances(t), "moved once")
	require.Equal(t, map[string]int64{"USD": 10000}, u.entrySums(t))
	require.Equal(t, int64(1), s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM ledger_entries WHERE user_id = '%s'`, u.id)))
}

func testTransaction(t *testing.T, s *server) {
	u, other := s.newUser(t), s.newUser(t)
	u.deposit(t, "USD", 10000)
	key := newKey()
	first := u.post(t, "/v1/transactions", key, `{"source_currency":"USD","target_currency":"EUR","amount":1000}`)
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	tr := first.json(t)
	require.Equal(t, []string{"amount", "converted_amount", "created_at", "id", "rate", "source_currency", "status", "target_currency"}, keys(tr))
	require.Equal(t, "USD", tr["source_currency"])
	require.Equal(t, "EUR", tr["target_currency"])
	require.Equal(t, float64(1000), tr["amount"])
	require.Equal(t, float64(920), tr["converted_amount"])
	require.Equal(t, "0.92", tr["rate"])
	require.Equal(t, "COMPLETED", tr["status"])
	id := tr["id"].(string)
	require.NoError(t, uuid.Validate(id))
	_, err := time.Parse(time.RFC3339, tr["created_at"].(string))
	require.NoError(t, err)
	require.Equal(t, "/v1/transactions/"+id, first.header.Get("Location"))

	again := u.post(t, "/v1/transactions", key, `{"source_currency":"USD","target_currency":"EUR","amount":1000}`)
	require.Equal(t, string(first.body), string(again.body))
	require.True(t, again.replayed())

	got := u.get(t, "/v1/transactions/"+id)
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, string(first.body), string(got.body))
	require.Equal(t, map[string]int64{"USD": 9000, "EUR": 920}, u.balances(t))

	// Rounding down, into and out of a currency without decimals:
	// 3.33 USD × 151.5 = 504.495 JPY → 504; 504 JPY × 0.00660066 = 3.3267 USD → 332 cents.
	yen := u.post(t, "/v1/transactions", newKey(), `{"source_currency":"USD","target_currency":"JPY","amount":333}`)
	require.Equal(t, http.StatusCreated, yen.status, "%s", yen)
	require.Equal(t, float64(504), yen.json(t)["converted_amount"])
	back := u.post(t, "/v1/transactions", newKey(), `{"source_currency":"JPY","target_currency":"USD","amount":504}`)
	require.Equal(t, http.StatusCreated, back.status, "%s", back)
	require.Equal(t, "0.00660066", back.json(t)["rate"])
	require.Equal(t, float64(332), back.json(t)["converted_amount"]) // never back above the 333 cents
	require.Equal(t, map[string]int64{"USD": 8999, "EUR": 920, "JPY": 0}, u.balances(t))
	require.Equal(t, u.balances(t), u.entrySums(t))

	// Someone else's transaction, a deposit's id, an unknown id, not an id: 404.
	for _, path := range []string{"/v1/transactions/" + id} {
		r := other.get(t, path)
		require.Equal(t, http.StatusNotFound, r.status, "another user's transaction")
		require.Equal(t, "not-found", r.problemType(t))
	}
	for _, path := range []string{"/v1/transactions/" + uuid.NewString(), "/v1/transactions/not-an-id", "/v1/deposits/" + id} {
		r := u.get(t, path)
		require.Equal(t, http.StatusNotFound, r.status, path)
		require.Equal(t, "not-found", r.problemType(t))
	}
	require.Empty(t, other.balances(t))
}

// testInvalidStored: a request that reaches the handler and is refused is a
// final answer: stored and replayed like a 201, and nothing moves.
func testInvalidStored(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 5000)
	cases := []struct {
		path, body, pointer string
	}{
		{"/v1/deposits", `{"currency":"USD","amount":100,"note":"hi"}`, "#/note"},
		{"/v1/deposits", `{"amount":100}`, "#/currency"},
		{"/v1/deposits", `{"currency":"USD"}`, "#/amount"},
		{"/v1/deposits", `{}`, "#/currency"},
		{"/v1/deposits", `{"currency":"USD","amount":1.5}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":100.0}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":1e3}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":"100"}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":null}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":0}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":-100}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":1000000000000001}`, "#/amount"},
		{"/v1/deposits", `{"currency":"USD","amount":99999999999999999999}`, "#/amount"},
		{"/v1/deposits", `{"currency":"usd","amount":100}`, "#/currency"},
		{"/v1/deposits", `{"currency":"CHF","amount":100}`, "#/currency"},
		{"/v1/deposits", `{"currency":840,"amount":100}`, "#/currency"},
		{"/v1/deposits", `[{"currency":"USD","amount":100}]`, "#"},
		{"/v1/deposits", `"USD"`, "#"},
		{"/v1/transactions", `{"source_currency":"USD","target_currency":"USD","amount":100}`, "#/target_currency"},
		{"/v1/transactions", `{"source_currency":"USD","target_currency":"XAU","amount":100}`, "#/target_currency"},
		{"/v1/transactions", `{"source_currency":"USD","amount":100}`, "#/target_currency"},
		{"/v1/transactions", `{"source_currency":"USD","target_currency":"EUR","amount":100,"rate":"2"}`, "#/rate"},
		// One centavo is a thousandth of a cent: it converts to nothing.
		{"/v1/transactions", `{"source_currency":"ARS","target_currency":"USD","amount":1}`, "#/amount"},
		// Ten trillion dollars is more pesos than an amount may hold.
		{"/v1/transactions", `{"source_currency":"USD","target_currency":"ARS","amount":1000000000000000}`, "#/amount"},
	}
	for _, c := range cases {
		key := newKey()
		first := u.post(t, c.path, key, c.body)
		require.Equal(t, http.StatusBadRequest, first.status, "%s %s: %s", c.path, c.body, first)
		require.Equal(t, "invalid-request", first.problemType(t))
		require.Contains(t, string(first.body), `"pointer":"`+c.pointer+`"`, "%s: %s", c.body, first)
		require.Empty(t, first.header.Get("Retry-After"))
		again := u.post(t, c.path, key, c.body)
		require.True(t, again.replayed(), "%s: stored", c.body)
		require.Equal(t, string(first.body), string(again.body))
		require.Equal(t, first.status, again.status)
	}
	require.Equal(t, int64(len(cases)+1), u.storedKeys(t))
	require.Equal(t, map[string]int64{"USD": 5000}, u.balances(t))
	require.Equal(t, map[string]int64{"USD": 5000}, u.entrySums(t))
}

func testInsufficientFunds(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 500)
	key := newKey()
	body := `{"source_currency":"USD","target_currency":"GBP","amount":501}`
	first := u.post(t, "/v1/transactions", key, body)
	require.Equal(t, http.StatusPaymentRequired, first.status, "%s", first)
	require.Equal(t, "insufficient-funds", first.problemType(t))
	require.Equal(t, map[string]int64{"USD": 500}, u.balances(t))

	// Stored: after a deposit the same key still answers 402, and a new key
	// goes through.
	u.deposit(t, "USD", 1)
	again := u.post(t, "/v1/transactions", key, body)
	require.Equal(t, http.StatusPaymentRequired, again.status)
	require.True(t, again.replayed())
	require.Equal(t, string(first.body), string(again.body))
	ok := u.post(t, "/v1/transactions", newKey(), body)
	require.Equal(t, http.StatusCreated, ok.status, "%s", ok)
	require.Equal(t, map[string]int64{"USD": 0, "GBP": 395}, u.balances(t)) // 5.01 × 0.79 = 3.9579 → 395, rounded down
	// A currency never held.
	r := u.post(t, "/v1/transactions", newKey(), `{"source_currency":"BRL","target_currency":"MXN","amount":1}`)
	require.Equal(t, http.StatusPaymentRequired, r.status, "%s", r)
	require.Equal(t, u.balances(t), u.entrySums(t))
}

func testKeyErrors(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 1000)
	stored := u.storedKeys(t)
	body := `{"currency":"USD","amount":100}`

	// Missing or malformed keys: 400, nothing stored.
	for _, c := range []struct {
		headers []string
		problem string
	}{
		{nil, "key-missing"},
		{[]string{"Idempotency-Key", strings.Repeat("k", 256)}, "key-invalid"},
		{[]string{"Idempotency-Key", "a,b"}, "key-invalid"},
		{[]string{"Idempotency-Key", "a;p=1"}, "key-invalid"},
		{[]string{"Idempotency-Key", "naïve"}, "key-invalid"},
		{[]string{"Idempotency-Key", "one", "Idempotency-Key", "two"}, "key-invalid"},
	} {
		for _, path := range []string{"/v1/deposits", "/v1/transactions"} {
			r := do(t, s, u, http.MethodPost, path, body, c.headers...)
			require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", c.headers, r)
			require.Equal(t, c.problem, r.problemType(t))
		}
	}
	require.Equal(t, stored, u.storedKeys(t), "nothing stored")

	// A key reused with another body, or on the other endpoint: 422.
	key := newKey()
	require.Equal(t, http.StatusCreated, u.post(t, "/v1/deposits", key, body).status)
	for _, c := range []struct{ path, body string }{
		{"/v1/deposits", `{"currency":"USD","amount":101}`},
		{"/v1/deposits", `{"currency":"EUR","amount":100}`},
		{"/v1/transactions", `{"source_currency":"USD","target_currency":"EUR","amount":100}`},
		{"/v1/transactions", body},
	} {
		r := u.post(t, c.path, key, c.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s %s: %s", c.path, c.body, r)
		require.Equal(t, "key-reused", r.problemType(t))
	}
	// The quoted form is the same key.
	r := do(t, s, u, http.MethodPost, "/v1/deposits", body, "Idempotency-Key", `"`+key+`"`)
	require.True(t, r.replayed(), "%s", r)
	// Keys are per user: another user's same key is a new request.
	other := s.newUser(t)
	require.Equal(t, http.StatusCreated, other.post(t, "/v1/deposits", key, body).status)
	require.Equal(t, map[string]int64{"USD": 1100}, u.balances(t))
	require.Equal(t, map[string]int64{"USD": 100}, other.balances(t))
}

func testBadInput(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 1000)
	stored := u.storedKeys(t)
	var euros int64 // the deposits that show a key is free, each of its own amount (the minute net)
	big := `{"currency":"USD","amount":100,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, c := range []struct {
		name, body, ctype string
		status            int
		problem           string
	}{
		{"TooLarge", big, "", http.StatusRequestEntityTooLarge, "body-too-large"},
		{"InvalidUTF8", "{\"currency\":\"US\xff\",\"amount\":100}", "", http.StatusBadRequest, "body-invalid"},
		{"TrailingData", `{"currency":"USD","amount":100} x`, "", http.StatusBadRequest, "body-invalid"},
		{"TwoValues", `{"currency":"USD","amount":100}{}`, "", http.StatusBadRequest, "body-invalid"},
		{"DuplicateNames", `{"currency":"USD","currency":"EUR","amount":100}`, "", http.StatusBadRequest, "body-invalid"},
		{"Malformed", `{"currency":"USD","amount":`, "", http.StatusBadRequest, "body-invalid"},
		{"LoneSurrogate", `{"currency":"\ud800","amount":100}`, "", http.StatusBadRequest, "body-invalid"},
		{"NotJSONType", `{"currency":"USD","amount":100}`, "text/plain", http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"FormType", `currency=USD&amount=100`, "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType, "unsupported-media-type"},
	} {
		for _, path := range []string{"/v1/deposits", "/v1/transactions"} {
			key := newKey()
			headers := []string{"Idempotency-Key", key}
			if c.ctype != "" {
				headers = append(headers, "Content-Type", "", "Content-Type", c.ctype)
			}
			r := do(t, s, u, http.MethodPost, path, c.body, headers...)
			require.Equal(t, c.status, r.status, "%s %s: %s", c.name, path, r)
			require.Equal(t, c.problem, r.problemType(t), c.name)
			// Nothing was stored: the key is still free.
			if path == "/v1/deposits" {
				euros++
				ok := u.post(t, path, key, fmt.Sprintf(`{"currency":"EUR","amount":%d}`, euros))
				require.Equal(t, http.StatusCreated, ok.status, "%s: %s", c.name, ok)
				require.False(t, ok.replayed())
				stored++
			}
		}
	}
	// A body without Content-Type is not JSON either.
	r := do(t, s, u, http.MethodPost, "/v1/deposits", `{"currency":"USD","amount":100}`, "Idempotency-Key", newKey(), "Content-Type", "")
	require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r)
	require.Equal(t, stored, u.storedKeys(t))
	require.Equal(t, map[string]int64{"USD": 1000, "EUR": 45}, u.balances(t)) // 1 + 2 + … + 9
}

func testMinuteNet(t *testing.T, s *server) {
	u := s.newUser(t)
	u.deposit(t, "USD", 10000)
	// Both requests must fall in one UTC minute.
	if now := time.Now(); now.Second() >= 50 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond).Sub(now))
	}
	body := `{"source_currency":"USD","target_currency":"EUR","amount":777}`
	first := u.post(t, "/v1/transactions", newKey(), body)
	require.Equal(t, http.StatusCreated, first.status, "%s", first)
	key := newKey()
	dup := u.post(t, "/v1/transactions", key, body)
	require.Equal(t, http.StatusConflict, dup.status, "%s", dup)
	require.Equal(t, "duplicate-transaction", dup.problemType(t))
	require.Empty(t, dup.header.Get("Retry-After"), "final, not try again")
	require.Equal(t, map[string]int64{"USD": 9223, "EUR": 714}, u.balances(t), "moved once") // 777 × 0.92 = 714.84 → 714
	// The 409 is the key's final answer.
	again := u.post(t, "/v1/transactions", key, body)
	require.True(t, again.replayed())
	require.Equal(t, string(dup.body), string(again.body))
	// Another amount is another transaction.
	other := u.post(t, "/v1/transactions", newKey(), `{"source_currency":"USD","target_currency":"EUR","amount":778}`)
	require.Equal(t, http.StatusCreated, other.status, "%s", other)
	require.Equal(t, int64(2), s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM transactions WHERE user_id = '%s'`, u.id)))
	require.Equal(t, u.balances(t), u.entrySums(t))
}

func testRates(t *testing.T, s *server) {
	u := s.newUser(t)
	r := u.get(t, "/v1/rates")
	require.Equal(t, http.StatusOK, r.status)
	m := r.json(t)
	require.Equal(t, "USD", m["base"])
	rates := m["rates"].(map[string]any)
	for _, c := range []string{"USD", "EUR", "GBP", "JPY", "ARS", "BRL", "MXN"} {
		require.IsType(t, "", rates[c], c)
	}
	require.Equal(t, "1", rates["USD"])
	require.Equal(t, "0.92", rates["EUR"])
	require.Equal(t, float64(0), m["decimals"].(map[string]any)["JPY"])
	require.Equal(t, float64(2), m["decimals"].(map[string]any)["USD"])
}

func testRoutes(t *testing.T, s *server) {
	u := s.newUser(t)
	h := do(t, s, nil, http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, h.status)
	require.JSONEq(t, `{"status":"ok"}`, string(h.body))

	r := u.get(t, "/v1/nothing-here")
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "not-found", r.problemType(t))
	r = do(t, s, u, http.MethodDelete, "/v1/balances", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Equal(t, "method-not-allowed", r.problemType(t))
	require.Equal(t, "GET, HEAD", r.header.Get("Allow"))
	r = do(t, s, u, http.MethodGet, "/v1/deposits", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Equal(t, "POST", r.header.Get("Allow"))
	r = do(t, s, nil, http.MethodGet, "/", "")
	require.Equal(t, http.StatusNotFound, r.status)
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
