package bank

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/google/uuid"

	"github.com/idem-dev/idem/sqlitestore"
)

//go:embed schema.sql
var schema string

// ErrKeyReused: the idempotency key was first used for another request.
var ErrKeyReused = errors.New("idempotency key used for another request")

// ErrNotFound: no transfer has that id.
var ErrNotFound = errors.New("transfer not found")

// Store keeps the bank's transfers in a SQLite file. Every transfer is
// committed (synchronously, see [sqlitestore.Open]) before its answer is
// sent, so an acknowledged transfer survives a crash.
type Store struct {
	// write has one connection: SQLite has one writer at a time, and a
	// queue in Go is fairer and faster than SQLite's busy-wait backoff.
	write *sql.DB
	read  *sql.DB
}

// Answer is the stored answer to a transfer request.
type Answer struct {
	Code     int    // 201 settled, 422 rejected
	Body     []byte // the transfer, as JSON
	Replayed bool   // the key had been used before: this is its first answer
}

// OpenStore opens (creating if needed) the bank's database file at path.
func OpenStore(ctx context.Context, path string) (*Store, error) {
	write, err := sqlitestore.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the bank's database: %w", err)
	}
	write.SetMaxOpenConns(1)
	if _, err := write.ExecContext(ctx, schema); err != nil {
		write.Close()
		return nil, fmt.Errorf("bank: create schema in %s: %w", path, err)
	}
	read, err := sqlitestore.Open(path)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open the bank's database: %w", err)
	}
	read.SetMaxOpenConns(runtime.GOMAXPROCS(0))
	return &Store{write: write, read: read}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	return errors.Join(s.write.Close(), s.read.Close())
}

// Transfer executes req under key once: the first call records the
// transfer, settled or (for a [RejectPrefix] destination) rejected, and
// every later call with the same key and request gets the same answer.
// The same key with another request is [ErrKeyReused].
func (s *Store) Transfer(ctx context.Context, key string, req Request) (Answer, error) {
	t := Transfer{
		ID:             "tr_" + uuid.NewString(),
		IdempotencyKey: key,
		Amount:         req.Amount,
		Currency:       req.Currency,
		Destination:    req.Destination,
		Status:         StatusSettled,
		CreatedAt:      time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
	}
	code := http.StatusCreated
	if req.rejected() {
		t.Status, code = StatusRejected, http.StatusUnprocessableEntity
	}
	body, err := json.Marshal(t)
	if err != nil {
		return Answer{}, fmt.Errorf("bank: marshal transfer: %w", err)
	}
	body = append(body, '\n')
	fp := req.fingerprint()
	// One statement claims the key: of any number of concurrent requests
	// with it, exactly one inserts.
	res, err := s.write.ExecContext(ctx, `INSERT INTO transfers
		(id, idempotency_key, fingerprint, status, amount, currency, destination, created_at, response_code, response_body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (idempotency_key) DO NOTHING`,
		t.ID, key, fp, t.Status, t.Amount, t.Currency, t.Destination, t.CreatedAt, code, body)
	if err != nil {
		return Answer{}, fmt.Errorf("bank: insert transfer: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Answer{}, fmt.Errorf("bank: insert transfer: %w", err)
	} else if n == 1 {
		return Answer{Code: code, Body: body}, nil
	}
	var first Answer
	var firstFP []byte
	err = s.read.QueryRowContext(ctx, `SELECT fingerprint, response_code, response_body FROM transfers WHERE idempotency_key = ?`, key).
		Scan(&firstFP, &first.Code, &first.Body)
	if err != nil {
		return Answer{}, fmt.Errorf("bank: read transfer of a used key: %w", err)
	}
	if !bytes.Equal(firstFP, fp) {
		return Answer{}, ErrKeyReused
	}
	first.Replayed = true
	return first, nil
}

// ByID returns the transfer with id, as JSON, or [ErrNotFound].
func (s *Store) ByID(ctx context.Context, id string) (json.RawMessage, error) {
	var body []byte
	err := s.read.QueryRowContext(ctx, `SELECT response_body FROM transfers WHERE id = ?`, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("bank: read transfer %s: %w", id, err)
	}
	return body, nil
}

// List returns the transfers, as JSON, oldest first: all of them, or with
// key given, the one recorded under that idempotency key if any.
func (s *Store) List(ctx context.Context, key *string) ([]json.RawMessage, error) {
	q, args := `SELECT response_body FROM transfers ORDER BY seq`, []any(nil)
	if key != nil {
		q, args = `SELECT response_body FROM transfers WHERE idempotency_key = ?`, []any{*key}
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("bank: list transfers: %w", err)
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("bank: list transfers: %w", err)
		}
		out = append(out, bytes.TrimSuffix(body, []byte("\n")))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("bank: list transfers: %w", err)
	}
	return out, nil
}
