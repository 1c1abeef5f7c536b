package main_test

// The end-to-end tests drive the real paymentsd binary over real HTTP, on
// real SQLite files and a real PostgreSQL (DATABASE_URL; each server gets a
// schema of its own through pgstore/pgtest); built with -tags mysql (make
// test-mysql), on a real MySQL or MariaDB too (mysql_test.go).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/pgstore/pgtest"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

// binary is the paymentsd built once for all tests, with the race
// detector when the tests have it.
var binary string

// parallel is how many tests run at once unless -parallel says otherwise.
// They spend their time waiting on paymentsd processes, not on the CPU, so
// the default (GOMAXPROCS) would leave the machine idle.
const parallel = "16"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", parallel)
	}
	if os.Getenv("PG_PARTITIONS") != "" || pgtest.Citus() {
		// make test-partitioned is about PostgreSQL's partitioned schema,
		// make test-citus about Citus's distributed one:
		// the tests that run on every store run on it alone (make test
		// runs them on SQLite).
		stores = []string{"postgres"}
	}
	os.Exit(proctest.Run(m, "paymentsd", &binary))
}

// Stores and modes: every behaviour is checked on each pair.
var (
	stores = []string{"sqlite", "postgres"}
	modes  = []string{"atomic-deferred", "leased"}
)

// sqlStores are the stores a build tag adds to stores (mysql_test.go), by
// name: the tests reach their databases through database/sql.
var sqlStores = map[string]sqlStore{}

type sqlStore struct {
	// newDB returns a --db value for a fresh, empty database.
	newDB func(t *testing.T) string
	// open returns a pool of one connection on a --db value's database;
	// the caller closes it.
	open func(t *testing.T, db string) *sql.DB
	// idemStore is the idem store on a pool of open's.
	idemStore func(t *testing.T, db *sql.DB) store.Store
	// lockWaiters counts the connections to the pool's database that run
	// a balance's locking read: while a test holds the balance, they wait.
	lockWaiters func(t *testing.T, db *sql.DB) int
}

// newDB returns a --db value for a fresh, empty database: a SQLite file in
// the test's temp dir, or a PostgreSQL URL whose search_path is a schema of
// the test's own.
func newDB(t *testing.T, store string) string {
	t.Helper()
	if k, ok := sqlStores[store]; ok {
		return k.newDB(t)
	}
	if store == "sqlite" {
		return filepath.Join(t.TempDir(), "paymentsd.db")
	}
	schema := pgtest.Schema(t)
	u, err := url.Parse(pgtest.SchemaURL(t, schema))
	require.NoError(t, err, "DATABASE_URL must be a URL for these tests")
	q := u.Query()
	q.Set("pool_max_conns", "6") // many servers share the test database's connections
	q.Set("application_name", "paymentsd-"+schema)
	u.RawQuery = q.Encode()
	if n := pgtest.Partitions(t); n > 0 { // make test-partitioned
		out, err := exec.Command(binary, "migrate", "--db", u.String(), "--partitions", strconv.Itoa(n)).CombinedOutput()
		require.NoError(t, err, "paymentsd migrate --partitions %d: %s", n, out)
	}
	if pgtest.Citus() { // make test-citus
		out, err := exec.Command(binary, "migrate", "--db", u.String(), "--citus").CombinedOutput()
		require.NoError(t, err, "paymentsd migrate --citus: %s", out)
	}
	return u.String()
}

// env is the environment of a paymentsd process: this one's, without
// DATABASE_URL (a test says --db), plus extra.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// server is a running paymentsd.
type server struct {
	url     string
	metrics string // the URL of /metrics, on a listener of its own
	db      string
	store   string
	cmd     *exec.Cmd
	stdout  *proctest.Buffer
	stderr  *proctest.Buffer
	exited  chan struct{} // closed when the process has exited
	err     error         // the process's exit, once exited is closed
}

// listening matches serve's listening line, in text or JSON.
var listening = regexp.MustCompile(`msg=listening url=(http://\S+) store=(\w+) mode=([\w-]+) metrics=(\S+)` +
	`|"msg":"listening","url":"(http://[^"]+)","store":"(\w+)","mode":"([\w-]+)","metrics":"([^"]+)"`)

// startServer starts `paymentsd serve --addr 127.0.0.1:0 --db db args…`
// and waits for its listening line. It stops the server when the test
// ends, and fails the test if the race detector spoke.
func startServer(t *testing.T, db string, args ...string) *server {
	t.Helper()
	return startIn(t, "", env(), append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, args...)...)
}

// startIn starts paymentsd with args in dir (the test's working directory
// when "") and environment, its /metrics on a free port.
func startIn(t *testing.T, dir string, environ []string, args ...string) *server {
	t.Helper()
	args = append(args, "--metrics-addr", "127.0.0.1:0")
	s := &server{stdout: &proctest.Buffer{}, stderr: &proctest.Buffer{}, exited: make(chan struct{})}
	for i, a := range args {
		if a == "--db" && i+1 < len(args) {
			s.db = args[i+1]
		}
	}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Dir, s.cmd.Env = dir, environ
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	require.NoError(t, s.cmd.Start())
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stop(t)
		switch {
		case strings.Contains(s.stderr.String(), "WARNING: DATA RACE"):
			t.Errorf("the race detector found a data race in paymentsd:\n%s", s.stderr.String())
		case t.Failed() && s.url != "":
			// Its log (never a body) says what the server saw. (One that
			// never listened has had it printed already.)
			t.Logf("paymentsd's log:\n%s", s.stderr.String())
		}
	})
	deadline := time.After(patience)
	for {
		if m := listening.FindStringSubmatch(s.stderr.String()); m != nil {
			if m[1] == "" {
				m = m[4:] // the JSON form's groups
			}
			s.url, s.store, s.metrics = m[1], m[2], m[4]
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("paymentsd exited before listening (%v):\n%s", s.err, s.stderr.String())
		case <-deadline:
			t.Fatalf("paymentsd did not listen within %v:\n%s", patience, s.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for the process; a process that does not
// drain in time is killed.
func (s *server) stop(t *testing.T) {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(patience):
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("paymentsd did not stop within %v of SIGTERM:\n%s", patience, s.stderr.String())
	}
}

// runCLI runs paymentsd to completion and returns its output and exit code.
func runCLI(t *testing.T, environ []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIIn(t, "", environ, args...)
}

// runCLIIn is runCLI in the working directory dir ("" for the test's). A
// serve without --metrics-addr gets a free port, as startIn's do, so that
// what it prints never depends on who holds the default port. A process
// still running after patience is killed and fails the test: a command
// expected to exit that serves instead must not hang the run.
func runCLIIn(t *testing.T, dir string, environ []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if len(args) > 0 && args[0] == "serve" && !slices.Contains(args, "--metrics-addr") {
		args = append(args, "--metrics-addr", "127.0.0.1:0")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = dir, environ
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(patience):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("paymentsd %s did not exit within %v:\n%s", strings.Join(args, " "), patience, errb.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errb.String(), 0
}

// user is an API user of a server.
type user struct {
	s      *server
	id     string
	apiKey string
}

// newUser creates a user with `paymentsd users create`.
func (s *server) newUser(t *testing.T) *user {
	t.Helper()
	out, errOut, code := runCLI(t, env(), "users", "create", "--db", s.db)
	require.Zero(t, code, errOut)
	var u struct {
		UserID string `json:"user_id"`
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &u), out)
	return &user{s: s, id: u.UserID, apiKey: u.APIKey}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// json decodes the body into a map.
func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "%s", r.body)
	return m
}

// problemType is the name of a problem response's type. It requires the
// retry advice a client reads without the body (docs/problems.md), on the
// first answer and on a replay alike.
func (r reply) problemType(t *testing.T) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "%s", r)
	typ, _ := r.json(t)["type"].(string)
	_, name, ok := strings.Cut(typ, "#")
	require.True(t, ok, "type %q", typ)
	require.Equal(t, strconv.FormatBool(retriedProblems[name]), r.header.Get(idem.HeaderShouldRetry), "%s: %s", idem.HeaderShouldRetry, r)
	return name
}

// retriedProblems are the problem types whose answer asks for a retry with
// the same key; every other one is final.
var retriedProblems = map[string]bool{
	"in-flight": true, "lease-lost": true, "store-unavailable": true, "internal-error": true, "unavailable": true,
	"payouts-unavailable": true, "too-many-requests": true, "overloaded": true, "body-timeout": true,
}

func (r reply) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

var client = &http.Client{Timeout: 60 * time.Second}

// do sends a request as the user (anonymously for a nil user). headers
// are name, value pairs; a body is sent as application/json unless they
// say otherwise.
func do(t *testing.T, s *server, u *user, method, path, body string, headers ...string) reply {
	t.Helper()
	r, err := try(s, u, method, path, body, headers...)
	require.NoError(t, err)
	return r
}

// sendAsync posts body with key as u in the background; the reply (or the
// error, as its body) arrives on the channel.
func sendAsync(s *server, u *user, path, body, key string) chan reply {
	c := make(chan reply, 1)
	go func() {
		r, err := try(s, u, http.MethodPost, path, body, "Idempotency-Key", key)
		if err != nil {
			r = reply{body: []byte(err.Error())}
		}
		c <- r
	}()
	return c
}

func try(s *server, u *user, method, path, body string, headers ...string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if u != nil {
		req.Header.Set("Authorization", "Bearer "+u.apiKey)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Add(headers[i], headers[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// post sends a keyed POST as u.
func (u *user) post(t *testing.T, path, key, body string) reply {
	t.Helper()
	return do(t, u.s, u, http.MethodPost, path, body, "Idempotency-Key", key)
}

func (u *user) get(t *testing.T, path string) reply {
	t.Helper()
	return do(t, u.s, u, http.MethodGet, path, "")
}

// balances reads the user's balances through the API.
func (u *user) balances(t *testing.T) map[string]int64 {
	t.Helper()
	r := u.get(t, "/v1/balances")
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var v struct {
		Balances []struct {
			Currency string `json:"currency"`
			Amount   int64  `json:"amount"`
		} `json:"balances"`
	}
	require.NoError(t, json.Unmarshal(r.body, &v))
	out := map[string]int64{}
	for _, b := range v.Balances {
		out[b.Currency] = b.Amount
	}
	return out
}

// deposit makes a deposit that must succeed.
func (u *user) deposit(t *testing.T, currency string, amount int64) {
	t.Helper()
	r := u.post(t, "/v1/deposits", newKey(), fmt.Sprintf(`{"currency":%q,"amount":%d}`, currency, amount))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
}

var keySeq struct {
	sync.Mutex
	n int
}

// newKey returns an Idempotency-Key no other request of the test run uses.
func newKey() string {
	keySeq.Lock()
	defer keySeq.Unlock()
	keySeq.n++
	return fmt.Sprintf("key-%d-%d", time.Now().UnixNano(), keySeq.n)
}

// sqlInt runs a query that returns one integer on the server's database,
// to check what the API says against what is stored.
func (s *server) sqlInt(t *testing.T, query string) int64 {
	t.Helper()
	return sqlValue[int64](t, s, query)
}

// sqlValue runs a query that returns one value on the server's database.
func sqlValue[T any](t *testing.T, s *server, query string) T {
	t.Helper()
	ctx := context.Background()
	var n T
	if s.store == "postgres" {
		conn, err := pgx.Connect(ctx, s.connURL(t))
		require.NoError(t, err)
		defer conn.Close(ctx)
		require.NoError(t, conn.QueryRow(ctx, query).Scan(&n), query)
		return n
	}
	var db *sql.DB
	if k, ok := sqlStores[s.store]; ok {
		// Closed at once: a server's connections are few, and a test may
		// query many times.
		db = k.open(t, s.db)
		defer db.Close()
	} else {
		db = s.sqlite(t)
	}
	require.NoError(t, db.QueryRowContext(ctx, query).Scan(&n), query)
	return n
}

// connURL is the server's PostgreSQL URL for a plain connection: without
// the pool's parameters.
func (s *server) connURL(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(s.db)
	require.NoError(t, err)
	q := u.Query()
	q.Del("pool_max_conns")
	u.RawQuery = q.Encode()
	return u.String()
}

func (s *server) sqlite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sqlitestore.Open(s.db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// storedKeys counts the user's idempotency records.
func (u *user) storedKeys(t *testing.T) int64 {
	t.Helper()
	return u.s.sqlInt(t, fmt.Sprintf(`SELECT count(*) FROM idempotency_keys WHERE scope = '%s'`, u.id))
}

// entrySums checks that every balance equals the sum of its ledger entries
// in the database, and returns the sums.
func (u *user) entrySums(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for c := range u.balances(t) {
		out[c] = u.s.sqlInt(t, fmt.Sprintf(`SELECT coalesce(sum(amount), 0) FROM ledger_entries WHERE user_id = '%s' AND currency = '%s'`, u.id, c))
		stored := u.s.sqlInt(t, fmt.Sprintf(`SELECT amount FROM balances WHERE user_id = '%s' AND currency = '%s'`, u.id, c))
		require.Equal(t, out[c], stored, "%s balance row against its entries", c)
	}
	return out
}

// each runs fn as a parallel subtest for every store and mode, with a
// server of its own started with args. SQLite cannot defer a claim, and
// paymentsd refuses atomic-deferred there: it runs atomic instead.
func each(t *testing.T, fn func(t *testing.T, s *server), args ...string) {
	for _, store := range stores {
		for _, mode := range modes {
			if store == "sqlite" && mode == "atomic-deferred" {
				mode = "atomic"
			}
			t.Run(camel(store)+camel(mode), func(t *testing.T) {
				t.Parallel()
				s := startServer(t, newDB(t, store), append([]string{"--idempotency-mode", mode}, args...)...)
				fn(t, s)
			})
		}
	}
}

func camel(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// patience bounds every wait for a state: generous, so that a slow, shared
// machine still passes; a test that meets its state returns at once.
const patience = time.Minute

// waitFor polls cond, on the test's goroutine (so cond may use require),
// until it holds, and fails the test after patience.
func waitFor(t *testing.T, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v: "+what, append([]any{patience}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
