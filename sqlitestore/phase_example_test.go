package sqlitestore_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/sqlitestore"
	"github.com/idem-dev/idem/store"
)

// A payout in two phases on an SQLite file (docs/payouts.md): phase A
// commits the debit with the recovery point PointOutcomeUnknown before the
// bank is called with the derived key; the bank does not answer, so the
// request answers 202 and stores nothing; the completer resumes it at its
// point, asks the bank again with the same key, and stores the final
// answer, which the client's retry then gets.
func Example_recoveryPoints() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlitestore.Open(filepath.Join(dir, "payouts.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlitestore.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE debits (bank_key TEXT PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	s := sqlitestore.New(db)
	mw, err := idem.New(s, idem.Config{Mode: idem.ModeLeased, ProviderKeySecret: []byte("a secret of at least 16 bytes")})
	if err != nil {
		log.Fatal(err)
	}

	// The bank: it deduplicates by key; its first answer is lost.
	transfers := map[string]bool{}
	answers := 0
	send := func(key string) bool {
		transfers[key] = true
		answers++
		return answers > 1
	}
	payout := func(ctx context.Context) idem.Response {
		point, err := idem.RecoveryPoint(ctx)
		if err != nil {
			return idem.Response{StatusCode: http.StatusServiceUnavailable}
		}
		bankKey, err := idem.ProviderKey(ctx, "bank")
		if err != nil {
			return idem.Response{StatusCode: http.StatusInternalServerError}
		}
		if point == "" {
			err := idem.Advance(ctx, idem.PointOutcomeUnknown, func(ctx context.Context) error {
				_, err := sqlitestore.DB(ctx, db).ExecContext(ctx, `INSERT INTO debits VALUES (?, 2500)`, bankKey)
				return err
			})
			if err != nil {
				return idem.Response{StatusCode: http.StatusInternalServerError}
			}
		}
		if !send(bankKey) { // resuming, the same key: the bank deduplicates
			if err := idem.Pending(ctx); err != nil {
				return idem.Response{StatusCode: http.StatusInternalServerError}
			}
			return idem.Response{StatusCode: http.StatusAccepted, Body: []byte("pending")}
		}
		return idem.Response{StatusCode: http.StatusCreated, Body: []byte("paid")}
	}

	h := sha256.Sum256([]byte(`{"amount":2500}`))
	call := idem.Call{Scope: "alice", Key: "payout-1", Method: "POST", Route: "/v1/payouts",
		Fingerprint: store.Fingerprint{Version: idem.FingerprintVersion, Method: "POST", Path: "/v1/payouts", Hash: h[:]}}
	first := mw.Do(ctx, call, payout)
	fmt.Println("request:", first.Response.StatusCode, string(first.Response.Body))

	c, err := completer.New(mw, s, func(ctx context.Context, _ store.Unfinished) idem.Response { return payout(ctx) }, completer.Config{})
	if err != nil {
		log.Fatal(err)
	}
	round, err := c.RunOnce(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completer finished:", round.Finished)
	retry := mw.Do(ctx, call, payout)
	fmt.Println("retry:", retry.Response.StatusCode, string(retry.Response.Body), "replayed:", retry.Replayed)
	var debits int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM debits`).Scan(&debits); err != nil {
		log.Fatal(err)
	}
	fmt.Println("debits:", debits, "transfers:", len(transfers))
	// Output:
	// request: 202 pending
	// completer finished: 1
	// retry: 201 paid replayed: true
	// debits: 1 transfers: 1
}
