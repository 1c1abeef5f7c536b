package main_test

// Payouts against a real bankd process: the happy path, a rejection, and
// SIGKILL of paymentsd at every step of a payout, followed by a retry or
// the completer alone.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/proctest"
	"github.com/idem-dev/idem/internal/require"
)

// builds are the binaries the tests build once, by package.
var builds sync.Map // package → *build

type build struct {
	once sync.Once
	path string
	err  error
}

// buildBinary builds pkg once, as name next to the paymentsd binary, for
// the tests that need it.
func buildBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &build{})
	b := v.(*build)
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(binary), name)
		out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	})
	require.NoError(t, b.err)
	return b.path
}

// buildBankd builds cmd/bankd once for the tests that need it.
func buildBankd(t *testing.T) string { return buildBinary(t, "bankd", "../bankd") }

// bankProc is a running bankd.
type bankProc struct {
	url    string
	cmd    *exec.Cmd
	stderr *proctest.Buffer
	exited chan struct{}
}

var bankListening = regexp.MustCompile(`(?m)^bankd: listening on (http://\S+)$`)

// startBank starts bankd on the SQLite file db with extra flags.
func startBank(t *testing.T, db string, args ...string) *bankProc {
	t.Helper()
	b := &bankProc{stderr: &proctest.Buffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(buildBankd(t), append([]string{"--addr", "127.0.0.1:0", "--db", db}, args...)...)
	b.cmd.Stderr = b.stderr
	require.NoError(t, b.cmd.Start())
	go func() {
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(b.kill)
	waitFor(t, func() bool {
		if m := bankListening.FindStringSubmatch(b.stderr.String()); m != nil {
			b.url = m[1]
			return true
		}
		return false
	}, "bankd's listening line: %s", b.stderr)
	return b
}

func (b *bankProc) kill() {
	_ = b.cmd.Process.Kill()
	<-b.exited
}

// bankTransfer is a transfer as the bank lists it.
type bankTransfer struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
}

func (b *bankProc) transfers(t *testing.T) []bankTransfer {
	t.Helper()
	resp, err := client.Get(b.url + "/v1/transfers")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct{ Transfers []bankTransfer }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	return list.Transfers
}

// kill SIGKILLs paymentsd and waits for it to die.
func (s *server) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	<-s.exited
}

// blackhole is a listener that accepts connections and never answers: a
// bank that has not received the request yet. accepted gets one value per
// connection.
func blackhole(t *testing.T) (url string, accepted chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = make(chan struct{}, 16)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String(), accepted
}

// secretFile writes a bank key secret and returns its path.
func secretFile(t *testing.T) string {
	t.Helper()
	return writeSecret(t, "a secret of the payouts tests, long enough")
}

func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bank-key-secret")
	require.NoError(t, os.WriteFile(p, []byte(secret+"\n"), 0o600))
	return p
}

// payoutArgs are paymentsd's flags for payouts through bankURL; a crashed
// attempt's lease runs out after three seconds. A phase's transaction holds
// the key's row, so a renewal waits for it: on a loaded machine a MySQL
// phase (ten round trips where PostgreSQL pipelines two) outlasted a lease
// of one second, and the payout ended 409 lease-lost.
func payoutArgs(t *testing.T, bankURL, secret string, completeEvery time.Duration) []string {
	return []string{"--bank-url", bankURL, "--bank-key-secret-file", secret, "--lease-duration", "3s",
		"--bank-timeout", "10m", "--complete-interval", completeEvery.String()}
}

const payoutBody = `{"currency":"USD","amount":2500,"destination":"acct-42"}`

func TestPayouts(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			bank := startBank(t, filepath.Join(t.TempDir(), "bank.db"))
			s := startServer(t, newDB(t, store), payoutArgs(t, bank.url, secretFile(t), time.Hour)...)
			u := s.newUser(t)
			u.deposit(t, "USD", 10000)

			paid := u.post(t, "/v1/payouts", "payout-1", payoutBody)
			require.Equal(t, http.StatusCreated, paid.status, "%s", paid)
			v := paid.json(t)
			require.Equal(t, "paid", v["status"])
			require.Equal(t, "acct-42", v["destination"])
			again := u.post(t, "/v1/payouts", "payout-1", payoutBody)
			require.True(t, again.replayed())
			require.Equal(t, paid.body, again.body)
			got := u.get(t, "/v1/payouts/"+v["id"].(string))
			require.Equal(t, http.StatusOK, got.status)
			require.Equal(t, v["bank_transfer_id"], got.json(t)["bank_transfer_id"])

			failed := u.post(t, "/v1/payouts", "payout-2", `{"currency":"USD","amount":1000,"destination":"reject-acct"}`)
			require.Equal(t, http.StatusCreated, failed.status, "%s", failed)
			require.Equal(t, "failed", failed.json(t)["status"])

			short := u.post(t, "/v1/payouts", "payout-3", `{"currency":"USD","amount":100000,"destination":"acct-42"}`)
			require.Equal(t, http.StatusPaymentRequired, short.status, "%s", short)

			require.Equal(t, map[string]int64{"USD": 7500}, u.balances(t), "paid: debited; rejected: refunded")
			require.Equal(t, map[string]int64{"USD": 7500}, u.entrySums(t))
			ts := bank.transfers(t)
			require.Len(t, ts, 2)
			for _, tr := range ts {
				require.NotContains(t, tr.IdempotencyKey, "payout-", "the bank never sees the client's key")
			}
		})
	}
}

func TestPayoutsWithoutABank(t *testing.T) {
	t.Parallel()
	s := startServer(t, newDB(t, "sqlite"))
	u := s.newUser(t)
	u.deposit(t, "USD", 10000)
	r := u.post(t, "/v1/payouts", newKey(), payoutBody)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r)
	require.Equal(t, "payouts-unavailable", r.problemType(t))
	require.Equal(t, map[string]int64{"USD": 10000}, u.balances(t))
}

// TestPayoutSIGKILL kills paymentsd at every step of a payout, then lets a
// client's retry, or the completer alone, finish it: exactly one transfer
// at the bank, the debit equal to what the bank moved, the payout paid.
//
//	before-call   phase A (debit, outcome unknown) committed; the request
//	              reached no bank (a listener that never answers)
//	during-call   the bank holds the request without executing it (hang)
//	after-bank    the bank executed it and holds its answer (slow-after);
//	              our phase B has not committed
//	after-commit  the payout is paid and its answer stored
func TestPayoutSIGKILL(t *testing.T) {
	t.Parallel()
	points := []struct {
		name   string
		faults string // bankd's faults while the first attempt runs
	}{
		{"before-call", ""},
		{"during-call", "hang=1"},
		{"after-bank", "slow-after=1"},
		{"after-commit", ""},
	}
	for _, store := range stores {
		for _, p := range points {
			// The two recoveries run one after the other: each point runs
			// paymentsd twice and bankd twice, and the machine is shared.
			t.Run(camel(store)+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				for _, recovery := range []string{"retry", "completer"} {
					t.Run(recovery, func(t *testing.T) { payoutAfterKill(t, store, p.name, p.faults, recovery, false) })
				}
			})
		}
	}
}

// TestPayoutSecretRotated restarts paymentsd with another bank key secret
// while a payout is pending (the bank executed it; our phase B has not
// committed): the retry, or the completer, sends the bank the key recorded
// with the payout's first phase, not one derived from the new secret, and
// the bank holds exactly one transfer.
func TestPayoutSecretRotated(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(camel(store), func(t *testing.T) {
			t.Parallel()
			for _, recovery := range []string{"retry", "completer"} {
				t.Run(recovery, func(t *testing.T) { payoutAfterKill(t, store, "after-bank", "slow-after=1", recovery, true) })
			}
		})
	}
}

// payoutAfterKill kills paymentsd at point, restarts it (with another
// secret when rotate) and lets recovery finish the payout.
func payoutAfterKill(t *testing.T, store, point, faults, recovery string, rotate bool) {
	bankDB := filepath.Join(t.TempDir(), "bank.db")
	db, secret := newDB(t, store), secretFile(t)
	const key = "payout-crash"

	var (
		bank     *bankProc
		bankURL  string
		accepted chan struct{}
	)
	switch {
	case point == "before-call":
		bankURL, accepted = blackhole(t)
	case faults != "":
		bank = startBank(t, bankDB, "--faults", faults, "--slow-delay", "10m")
		bankURL = bank.url
	default:
		bank = startBank(t, bankDB)
		bankURL = bank.url
	}
	first := startServer(t, db, payoutArgs(t, bankURL, secret, time.Hour)...)
	u := first.newUser(t)
	u.deposit(t, "USD", 10000)
	pending := sendAsync(first, u, "/v1/payouts", payoutBody, key)
	switch point {
	case "before-call":
		awaitStep(t, first, u, key, &pending, func() bool {
			select {
			case <-accepted:
				return true
			default:
				return false
			}
		}, "the request reaches the bank")
	case "during-call":
		awaitStep(t, first, u, key, &pending, func() bool { return strings.Contains(bank.stderr.String(), "fault=hang") }, "the bank holds the request")
	case "after-bank":
		awaitStep(t, first, u, key, &pending, func() bool { return len(bank.transfers(t)) == 1 }, "the bank executes the transfer")
	case "after-commit":
		r := <-pending
		require.Equal(t, http.StatusCreated, r.status, "%s", r)
	}
	require.Equal(t, int64(1), first.sqlInt(t, `SELECT count(*) FROM payouts`), "phase A committed before the bank was called")
	first.kill(t)

	// The bank comes back without faults (a restart of its own), and
	// paymentsd restarts on the same database.
	if bank != nil {
		bank.kill()
	}
	bank = startBank(t, bankDB)
	every := time.Hour
	if recovery == "completer" {
		every = 100 * time.Millisecond
	}
	if rotate {
		secret = writeSecret(t, "the next secret of the payouts tests, just as long")
	}
	second := startServer(t, db, payoutArgs(t, bank.url, secret, every)...)
	u.s = second
	var final reply
	switch recovery {
	case "retry":
		final = retryUntilFinal(t, u, key, payoutBody)
	case "completer":
		waitFor(t, func() bool {
			return second.sqlInt(t, `SELECT count(*) FROM payouts WHERE status <> 'pending'`) == 1
		}, "the completer finishes the payout")
		final = u.post(t, "/v1/payouts", key, payoutBody)
		require.True(t, final.replayed(), "the retry gets the completer's answer: %s", final)
	}
	require.Equal(t, http.StatusCreated, final.status, "%s", final)
	v := final.json(t)
	require.Equal(t, "paid", v["status"])

	ts := bank.transfers(t)
	require.Len(t, ts, 1, "exactly one transfer at the bank: %+v", ts)
	require.Equal(t, "settled", ts[0].Status)
	require.Equal(t, int64(2500), ts[0].Amount)
	require.Equal(t, ts[0].ID, v["bank_transfer_id"])
	bankKey := sqlValue[string](t, second, `SELECT bank_key FROM payouts`)
	require.Equal(t, bankKey, ts[0].IdempotencyKey)
	require.Equal(t, map[string]int64{"USD": 10000 - 2500}, u.balances(t), "the debit is what the bank moved")
	require.Equal(t, map[string]int64{"USD": 10000 - 2500}, u.entrySums(t))
	again := u.post(t, "/v1/payouts", key, payoutBody)
	require.True(t, again.replayed())
	require.Equal(t, final.body, again.body)
}

// retryUntilFinal retries a payout with its key until its answer is final
// (201), as a client would: 409 while another attempt holds the key, 202
// while the outcome is unknown.
func retryUntilFinal(t *testing.T, u *user, key, body string) reply {
	t.Helper()
	var r reply
	waitFor(t, func() bool {
		var err error
		r, err = try(u.s, u, http.MethodPost, "/v1/payouts", body, "Idempotency-Key", key)
		return err == nil && r.status == http.StatusCreated
	}, "a final answer to the retry; last: %s", &r)
	return r
}

// awaitStep waits until the payout running on s has reached the step cond
// tells. A request the server turned away before that step with an answer
// that asks for a retry (a busy store or a bound on a loaded machine: 503,
// 429, 409) is sent again with the same key, as a client would.
func awaitStep(t *testing.T, s *server, u *user, key string, pending *chan reply, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		select {
		case r := <-*pending:
			switch r.status {
			case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusConflict:
				*pending = sendAsync(s, u, "/v1/payouts", payoutBody, key)
			default:
				t.Fatalf("the payout ended before %s: %s", what, r)
			}
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v: %s", patience, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
