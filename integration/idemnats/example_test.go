package idemnats_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemnats"
	"github.com/idem-dev/idem/sqlitestore"
)

// A JetStream consumer on an SQLite file: the producer publishes one
// command twice (its retry after a lost acknowledgement), and the payment
// is made once; both answers are published to payments.results, the
// second marked replayed. An embedded NATS server stands in for yours, and
// pgstore.New(pool) can stand in for the SQLite store.
func Example() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		log.Fatal(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(30 * time.Second) {
		log.Fatal("NATS did not start")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	for name, subject := range map[string]string{"PAYMENTS": "payments.commands.>", "PAYMENTS_DEADLETTER": "payments.dead"} {
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			log.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "PAYMENTS", jetstream.ConsumerConfig{
		Durable: "payments", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "payments.commands.>",
	})
	if err != nil {
		log.Fatal(err)
	}

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
		var id int64
		err := sqlitestore.DB(ctx, db).QueryRowContext(ctx, `INSERT INTO payments (amount) VALUES (100) RETURNING id`).Scan(&id)
		if err != nil {
			return idem.Response{StatusCode: http.StatusServiceUnavailable}
		}
		return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"id":%d,"amount":100}`, id)}
	}, consumer.Config{})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := idemnats.New(c, js, idemnats.Config{ResultSubject: "payments.results", DeadLetterSubject: "payments.dead"})
	if err != nil {
		log.Fatal(err)
	}
	results, err := nc.SubscribeSync("payments.results")
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx, cons) }()

	for range 2 {
		msg := &nats.Msg{Subject: "payments.commands.deposits", Header: nats.Header{"Idempotency-Key": {"order-42"}}, Data: []byte(`{"amount":100}`)}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			log.Fatal(err)
		}
		answer, err := results.NextMsg(time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(answer.Header.Get(consumer.HeaderStatus), string(answer.Data), "replayed:", answer.Header.Get(consumer.HeaderReplayed) == "true")
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments:", n)
	// Output:
	// 201 {"id":1,"amount":100} replayed: false
	// 201 {"id":1,"amount":100} replayed: true
	// payments: 1
}
