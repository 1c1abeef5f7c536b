// Command upstream is the service the chaos harness's gateway phase puts
// behind idem-gateway: a small payments-like API in Go that records one
// effect per request with one durable INSERT into PostgreSQL. With
// --dedup it deduplicates on the forwarded Idempotency-Key, as a service
// that keeps its own keys does; without, every request it receives runs
// again. Its link misbehaves on demand (--faults, bankd's kinds), and it
// remembers every request it received and what became of it, so that the
// harness can tell a request sent again after an unknown outcome.
//
//	upstream --db URL --name NAME [--dedup] [--addr HOST:PORT] [--faults SPEC] [--seed N] [--slow-delay D]
//
// POST /…/effects {"ref":"…","amount":N} → 201 {"id":"eff_N","ref":"…","amount":N} and a Location.
// GET /effects?key=K (the operator's look-up by forwarded key), GET /arrivals
// (what it received), POST /calm (faults off) are the harness's.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/cmd/internal/bank"
	"github.com/idem-dev/idem/cmd/internal/cli"
)

const schema = `
CREATE TABLE IF NOT EXISTS upstream_effects (
    id              bigserial PRIMARY KEY,
    upstream        text   NOT NULL,
    idempotency_key text   NOT NULL,
    ref             text   NOT NULL,
    amount          bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS upstream_keys (
    upstream        text NOT NULL,
    idempotency_key text NOT NULL,
    effect_id       bigint,
    PRIMARY KEY (upstream, idempotency_key)
)`

func main() {
	cli.Main("upstream", run)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	db := fs.String("db", "", "the PostgreSQL URL (required)")
	addr := fs.String("addr", "127.0.0.1:0", "listen on HOST:PORT")
	name := fs.String("name", "", "the name its effects are recorded under (required)")
	dedup := fs.Bool("dedup", false, "deduplicate on the forwarded Idempotency-Key")
	spec := fs.String("faults", "", "fault probabilities per request, as bankd's --faults")
	seed := fs.Uint64("seed", 1, "seed of the fault draws")
	slow := fs.Duration("slow-delay", 1500*time.Millisecond, "how late a slow-after fault answers")
	if err := cli.ParseFlags(fs, args, stdout, "upstream", "upstream --db URL --name NAME [--dedup] [flags]"); err != nil {
		return err
	}
	faults, err := bank.ParseFaults(*spec)
	if *db == "" || *name == "" || err != nil {
		return cli.Usagef("--db and --name are required, --faults valid (%v)", err)
	}
	pool, err := pgxpool.New(ctx, *db)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	s := &service{pool: pool, name: *name, dedup: *dedup, slowDelay: *slow, dice: bank.NewDice(faults, *seed)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{prefix}/effects", s.effect)
	mux.HandleFunc("GET /effects", s.lookup)
	mux.HandleFunc("GET /arrivals", s.arrivals)
	mux.HandleFunc("POST /calm", func(w http.ResponseWriter, _ *http.Request) { s.calm.Store(true) })
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "listening on http://%s (%s, dedup %v, faults %q)\n", ln.Addr(), *name, *dedup, faults)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Arrival is one request the service received and what became of it.
// Seq numbers order every arrival and every end on one clock.
type Arrival struct {
	Key      string `json:"key"`
	Ref      string `json:"ref"`
	Arrived  int64  `json:"arrived"`
	Finished int64  `json:"finished"`
	// Outcome: "refused" (a 5xx, nothing done), "dropped" (no answer,
	// nothing done), "executed" (an effect committed, whatever the answer),
	// "replayed" (the key's earlier effect answered), "ambiguous" (the
	// commit's outcome is unknown; no answer).
	Outcome string `json:"outcome"`
	Fault   string `json:"fault,omitempty"`
}

// Outcomes of an arrival.
const (
	Refused   = "refused"
	Dropped   = "dropped"
	Executed  = "executed"
	Replayed  = "replayed"
	Ambiguous = "ambiguous"
)

type service struct {
	pool      *pgxpool.Pool
	name      string
	dedup     bool
	slowDelay time.Duration
	dice      *bank.Dice
	calm      atomic.Bool // faults off

	mu  sync.Mutex // guards seq, log and every Arrival's fields
	seq int64
	log []*Arrival
}

func (s *service) arrive(key, ref string, fault bank.Fault) *Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	a := &Arrival{Key: key, Ref: ref, Arrived: s.seq}
	if fault != bank.NoFault {
		a.Fault = fault.String()
	}
	s.log = append(s.log, a)
	return a
}

func (s *service) finish(a *Arrival, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	a.Finished, a.Outcome = s.seq, outcome
}

type effectBody struct {
	ID     string `json:"id"`
	Ref    string `json:"ref"`
	Amount int64  `json:"amount"`
}

func (s *service) effect(w http.ResponseWriter, r *http.Request) {
	var req effectBody
	key := r.Header.Get("Idempotency-Key")
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Ref == "" {
		http.Error(w, "want {\"ref\":…,\"amount\":…}", http.StatusBadRequest)
		return
	}
	fault := bank.NoFault
	if !s.calm.Load() {
		fault = s.dice.Roll()
	}
	a := s.arrive(key, req.Ref, fault)
	switch fault {
	case bank.ErrorBefore:
		s.finish(a, Refused)
		http.Error(w, "not executed", http.StatusInternalServerError)
		return
	case bank.Hang:
		<-r.Context().Done()
		s.finish(a, Dropped)
		panic(http.ErrAbortHandler)
	}
	// An effect is not undone because the caller hung up.
	body, outcome, err := s.record(context.WithoutCancel(r.Context()), key, req)
	s.finish(a, outcome)
	switch {
	case outcome == Ambiguous:
		panic(http.ErrAbortHandler) // say nothing: we do not know
	case err != nil:
		http.Error(w, "not executed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	switch fault {
	case bank.ErrorAfter:
		http.Error(w, "an error occurred", http.StatusInternalServerError)
		return
	case bank.SlowAfter:
		select {
		case <-time.After(s.slowDelay):
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
	case bank.ResetAfter:
		bank.ResetConn(w)
		return
	}
	w.Header().Set("Location", r.URL.Path+"/"+body.ID)
	writeJSON(w, http.StatusCreated, body)
}

// record makes the request's effect, or with --dedup finds the key's
// earlier one, in one transaction. A failure before the commit is
// Refused; a failed commit is Ambiguous.
func (s *service) record(ctx context.Context, key string, req effectBody) (effectBody, string, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return effectBody{}, Refused, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if s.dedup {
		tag, err := tx.Exec(ctx, `INSERT INTO upstream_keys (upstream, idempotency_key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, s.name, key)
		if err != nil {
			return effectBody{}, Refused, err
		}
		if tag.RowsAffected() == 0 {
			prior, err := s.find(ctx, tx, key)
			if err != nil {
				return effectBody{}, Refused, err
			}
			return prior, Replayed, tx.Commit(ctx)
		}
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO upstream_effects (upstream, idempotency_key, ref, amount) VALUES ($1, $2, $3, $4) RETURNING id`,
		s.name, key, req.Ref, req.Amount).Scan(&id); err != nil {
		return effectBody{}, Refused, err
	}
	if s.dedup {
		if _, err := tx.Exec(ctx, `UPDATE upstream_keys SET effect_id = $3 WHERE upstream = $1 AND idempotency_key = $2`, s.name, key, id); err != nil {
			return effectBody{}, Refused, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return effectBody{}, Ambiguous, err
	}
	return effectBody{ID: fmt.Sprintf("eff_%d", id), Ref: req.Ref, Amount: req.Amount}, Executed, nil
}

// find is the first effect recorded under key.
func (s *service) find(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key string) (effectBody, error) {
	var b effectBody
	var id int64
	err := q.QueryRow(ctx, `SELECT id, ref, amount FROM upstream_effects WHERE upstream = $1 AND idempotency_key = $2 ORDER BY id LIMIT 1`,
		s.name, key).Scan(&id, &b.Ref, &b.Amount)
	b.ID = fmt.Sprintf("eff_%d", id)
	return b, err
}

// lookup is what an operator asks of a service: did you act on this key,
// and what did you answer? 200 with the answer's body, or 404.
func (s *service) lookup(w http.ResponseWriter, r *http.Request) {
	b, err := s.find(r.Context(), s.pool, r.URL.Query().Get("key"))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		http.Error(w, "no effect under this key", http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		writeJSON(w, http.StatusOK, b)
	}
}

func (s *service) arrivals(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.log)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
