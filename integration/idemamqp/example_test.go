package idemamqp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemamqp"
	"github.com/idem-dev/idem/pgstore"
)

// A RabbitMQ worker on PostgreSQL: each command in the quorum queue
// payments.commands makes one payment per Idempotency-Key, however often
// it is delivered; answers go to the delivery's reply-to and to
// payments.results, final failures to payments.dead. (Compiled, not run:
// it needs a RabbitMQ, and it consumes until interrupted. idemnats's
// Example runs the same wiring against an embedded NATS server.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pgstore.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	dial := func(context.Context) (*amqp.Connection, error) {
		return amqp.Dial(os.Getenv("AMQP_URL")) // amqp://guest:guest@127.0.0.1:5672/
	}
	conn, err := dial(ctx)
	if err != nil {
		log.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{"payments.commands", "payments.results", "payments.dead"} {
		// Quorum queues count deliveries, which bounds a message's retries.
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			log.Fatal(err)
		}
	}
	_ = ch.Close()

	mw, err := idem.New(pgstore.New(pool), idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		// The insert joins the message's transaction, which commits with
		// the key's completion before the delivery is acknowledged.
		var id int64
		err := pgstore.DB(ctx, pool).QueryRow(ctx, `INSERT INTO payments (amount) VALUES (100) RETURNING id`).Scan(&id)
		if err != nil {
			return idem.Response{StatusCode: http.StatusServiceUnavailable} // requeued after a back-off
		}
		return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"id":%d,"amount":100}`, id)}
	}, consumer.Config{})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := idemamqp.New(c, conn, idemamqp.Config{ResultQueue: "payments.results", DeadLetterQueue: "payments.dead", Workers: 4,
		Redial: dial})
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	// Run returns when ctx ends; a lost connection (a broker restart) is
	// dialled again and consumed on, as Redial is set.
	if err := worker.Run(ctx, "payments.commands"); err != nil {
		log.Fatal(err)
	}
}
