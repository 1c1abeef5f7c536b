package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/sqlitestore"
)

// A queue consumer on an SQLite file: the broker delivers a command twice,
// and a poison message once. An adapter (idemnats, idemamqp) does what
// Process decides; here the decisions are printed.
func Example_consumer() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	db, err := sqlitestore.Open(filepath.Join(dir, "payments.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlitestore.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	mw, err := idem.New(sqlitestore.New(db), idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		if string(m.Body) != `{"amount":100}` {
			return idem.Response{StatusCode: http.StatusBadRequest, Body: []byte(`{"error":"unknown command"}`)} // final: dead-lettered
		}
		// The write joins the message's transaction: it commits with the
		// key's completion, before Process returns Ack.
		var id int64
		err := sqlitestore.DB(ctx, db).QueryRowContext(ctx, `INSERT INTO payments (amount) VALUES (100) RETURNING id`).Scan(&id)
		if err != nil {
			return idem.Response{StatusCode: http.StatusServiceUnavailable} // retried with back-off
		}
		return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"id":%d,"amount":100}`, id)}
	}, consumer.Config{})
	if err != nil {
		log.Fatal(err)
	}

	deliveries := []*consumer.Message{
		{Subject: "payments.commands", Header: http.Header{"Idempotency-Key": {"order-42"}}, Body: []byte(`{"amount":100}`), Deliveries: 1},
		{Subject: "payments.commands", Header: http.Header{"Idempotency-Key": {"order-42"}}, Body: []byte(`{"amount":100}`), Deliveries: 2},
		{Subject: "payments.commands", Header: http.Header{"Idempotency-Key": {"order-43"}}, Body: []byte(`{"amount":"lots"}`), Deliveries: 1},
	}
	for _, m := range deliveries {
		d := c.Process(ctx, m)
		fmt.Println(d.Action, d.Result.Outcome, d.Result.Response.StatusCode, string(d.Result.Response.Body))
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments:", n)
	// Output:
	// ack executed 201 {"id":1,"amount":100}
	// ack replayed 201 {"id":1,"amount":100}
	// dead-letter executed 400 {"error":"unknown command"}
	// payments: 1
}
