package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os/exec"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/pgledger"
	"github.com/idem-dev/idem/pgstore"
)

// startBalance is each user's USD balance: far more than a run moves, far
// below payments.DefaultMaxBalance.
const startBalance int64 = 100_000_000_000_000_000

type user struct {
	id     string
	apiKey string
	hash   []byte
}

// database is one schema of the run: the server's URL it was made on, its
// own URL (search_path set), a pool on it for the generator, and its users.
type database struct {
	schema string
	base   string
	url    string
	pool   *pgxpool.Pool
	users  []user
}

// newDatabase creates a schema with the key table and the wallet, and
// users with an API key each, a large USD balance and an empty EUR one.
// The tables are this build's, or, when migrator names a paymentsd binary
// (a baseline's, or this build's for a Citus coordinator), that build's,
// made by its migrate command with migrateArgs.
func newDatabase(ctx context.Context, baseURL, prefix, migrator string, users, conns int, migrateArgs ...string) (*database, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", dburl.Display(baseURL), dburl.ScrubError(err, baseURL))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("bench: DATABASE_URL must be a postgres:// URL")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db := &database{schema: schema, base: baseURL, url: u.String()}
	cfg, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(max(conns, 4))
	if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	if err := migrate(ctx, db, migrator, migrateArgs...); err != nil {
		return nil, err
	}
	if _, err := db.pool.Exec(ctx, createTrivial); err != nil {
		return nil, fmt.Errorf("create the trivial handler's table: %w", err)
	}
	db.users = make([]user, users)
	rows := make([][]any, 0, users)
	keys := make([][]any, 0, users)
	bals := make([][]any, 0, 2*users)
	for i := range db.users {
		var id [16]byte
		_, _ = rand.Read(id[:])
		id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
		uid := fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:])
		key := payments.NewAPIKey()
		db.users[i] = user{id: uid, apiKey: key, hash: payments.HashAPIKey(key)}
		rows = append(rows, []any{uid})
		keys = append(keys, []any{db.users[i].hash, uid})
		bals = append(bals, []any{uid, "USD", startBalance}, []any{uid, "EUR", int64(0)})
	}
	for _, c := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"users", []string{"id"}, rows},
		{"api_keys", []string{"key_hash", "user_id"}, keys},
		{"balances", []string{"user_id", "currency", "amount"}, bals},
	} {
		if _, err := db.pool.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
			return nil, fmt.Errorf("create users: %s: %w", c.table, err)
		}
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE"); err != nil {
		return nil, err
	}
	return db, nil
}

// migrate makes db's key table and wallet: this build's, or those of the
// paymentsd binary migrator, whose migrate command gets args.
func migrate(ctx context.Context, db *database, migrator string, args ...string) error {
	if migrator != "" {
		argv := append([]string{"migrate", "--db", db.url}, args...)
		out, err := exec.CommandContext(ctx, migrator, argv...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s migrate: %w: %s", migrator, err, tail(string(out), 5))
		}
		return nil
	}
	if _, err := pgstore.Migrate(ctx, db.pool); err != nil {
		return err
	}
	_, err := pgledger.Migrate(ctx, db.pool)
	return err
}

// drop closes the pool and drops the schema.
func (db *database) drop(ctx context.Context) error {
	db.pool.Close()
	conn, err := pgx.Connect(ctx, db.base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA "+db.schema+" CASCADE")
	return err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
