package idemnats_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemnats"
	"github.com/idem-dev/idem/store"
)

// A JetStream worker: each command published under payments.commands
// makes one payment per Idempotency-Key, however often it is delivered;
// answers go to the message's Reply-To and to payments.results, final
// failures to payments.dead. (Compiled, not run: it needs a NATS server
// with JetStream, and it consumes until interrupted. Module integration
// runs the same wiring against an embedded NATS server, and the package's
// tests with it: integration/idemnats.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// The store shared by every replica: pgstore.New(pool) in ModeAtomic,
	// the handler's writes joining the message's transaction through
	// pgstore.DB(ctx, pool); or sqlitestore.New(db) for one process.
	var st store.Store
	mw, err := idem.New(st, idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		// Make the payment m.Body describes, in the message's transaction;
		// a 5xx answer is retried after a back-off, a 4xx is final.
		return idem.Response{StatusCode: http.StatusCreated, Body: []byte(`{"status":"paid"}`)}
	}, consumer.Config{})
	if err != nil {
		log.Fatal(err)
	}

	nc, err := nats.Connect(os.Getenv("NATS_URL")) // nats://127.0.0.1:4222 when empty
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
	worker, err := idemnats.New(c, js, idemnats.Config{ResultSubject: "payments.results", DeadLetterSubject: "payments.dead", Workers: 4})
	if err != nil {
		log.Fatal(err)
	}
	// Run returns when ctx ends.
	if err := worker.Run(ctx, cons); err != nil {
		log.Fatal(err)
	}
}
