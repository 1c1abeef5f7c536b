package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/idem-dev/idem/internal/require"
	"go.yaml.in/yaml/v3"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/api"
	"github.com/idem-dev/idem/payments/sqliteledger"
	"github.com/idem-dev/idem/sqlitestore"
)

// spec is the part of api/openapi.yaml these tests read.
type spec struct {
	Paths map[string]map[string]struct {
		RequestBody struct {
			Content map[string]struct {
				Example any `yaml:"example"`
			} `yaml:"content"`
		} `yaml:"requestBody"`
		Responses map[string]any `yaml:"responses"`
	} `yaml:"paths"`
}

func readSpec(t *testing.T) (spec, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "api", "openapi.yaml"))
	require.NoError(t, err)
	var s spec
	require.NoError(t, yaml.Unmarshal(b, &s))
	return s, string(b)
}

// newHandler serves the API on a fresh SQLite database and returns it with
// a user's API key.
func newHandler(t *testing.T) (http.Handler, string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitestore.Open(filepath.Join(t.TempDir(), "api.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = sqlitestore.Migrate(ctx, db)
	require.NoError(t, err)
	_, err = sqliteledger.Migrate(ctx, db)
	require.NoError(t, err)
	svc, err := payments.New(sqliteledger.New(db), payments.Config{})
	require.NoError(t, err)
	mw, err := idem.New(sqlitestore.New(db), idem.Config{Mode: idem.ModeAtomic})
	require.NoError(t, err)
	h, err := api.New(api.Config{Service: svc, Idempotency: mw})
	require.NoError(t, err)
	_, key, err := svc.CreateUser(ctx)
	require.NoError(t, err)
	return h, key
}

// TestSpecMatchesRoutes sends each operation of the spec, with its
// example body, to the handler: every status it answers is one the spec
// lists for the operation. Other methods get 405 with Allow.
func TestSpecMatchesRoutes(t *testing.T) {
	t.Parallel()
	s, _ := readSpec(t)
	h, key := newHandler(t)
	require.NotEmpty(t, s.Paths)
	for path, ops := range s.Paths {
		concrete := strings.ReplaceAll(path, "{id}", uuid.NewString())
		for method, op := range ops {
			method = strings.ToUpper(method)
			var body string
			if ex, ok := op.RequestBody.Content["application/json"]; ok {
				b, err := json.Marshal(ex.Example)
				require.NoError(t, err)
				body = string(b)
			}
			req := httptest.NewRequest(method, concrete, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Idempotency-Key", uuid.NewString())
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			_, documented := op.Responses[strconv.Itoa(rec.Code)]
			require.True(t, documented, "%s %s answered %d, which the spec does not list: %s", method, path, rec.Code, rec.Body)
		}
		req := httptest.NewRequest(http.MethodPatch, concrete, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code, "PATCH %s", path)
		require.NotEmpty(t, rec.Header().Get("Allow"))
	}
}

// TestSpecNamesEveryProblem: every problem type the API answers with is
// documented.
func TestSpecNamesEveryProblem(t *testing.T) {
	t.Parallel()
	_, text := readSpec(t)
	for _, p := range []api.ProblemType{
		api.ProblemUnauthorized, api.ProblemInvalidRequest, api.ProblemUnsupportedMediaType,
		api.ProblemInsufficientFunds, api.ProblemBalanceLimit, api.ProblemDuplicate, api.ProblemDuplicateDeposit, api.ProblemNotFound,
		api.ProblemInternal, api.ProblemUnavailable, api.ProblemBodyTimeout, api.ProblemOverloaded, api.ProblemTooManyRequests,
	} {
		require.Contains(t, text, "`"+string(p)+"`", p)
	}
	require.True(t, strings.HasPrefix(api.TypeURI(api.ProblemDuplicate), idem.DefaultProblemTypeBase))
}
