package idemamqp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemamqp"
	"github.com/idem-dev/idem/memstore"
)

// A RabbitMQ worker: the producer publishes one command twice (its retry
// after a lost confirm), and the payment is made once; both answers go to
// the result queue, the second marked replayed. It runs against the
// RabbitMQ at AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/), as
// the package's tests do (make test-rabbitmq), on memstore, the in-memory
// store. In production the store is pgstore.New(pool) in ModeAtomic, the
// handler's writes join the message's transaction through pgstore.DB, the
// queues are durable quorum queues (which count deliveries, bounding a
// message's retries), and Config.Redial consumes on after a broker
// restart.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	// Queues of this connection only, deleted with it.
	var queues [2]string // the commands, the answers
	for i := range queues {
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			log.Fatal(err)
		}
		queues[i] = q.Name
	}
	commands, results := queues[0], queues[1]

	mw, err := idem.New(memstore.New(), idem.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var made atomic.Int64
	c, err := consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		id := made.Add(1)
		return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"payment":%d}`, id)}
	}, consumer.Config{})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := idemamqp.New(c, conn, idemamqp.Config{ResultQueue: results})
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, commands) }()

	answers, err := ch.Consume(results, "", true, true, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		err := ch.PublishWithContext(ctx, "", commands, false, false, amqp.Publishing{
			Headers: amqp.Table{"Idempotency-Key": "order-42"}, Body: []byte(`{"amount":100}`),
		})
		if err != nil {
			log.Fatal(err)
		}
		select {
		case d := <-answers:
			fmt.Println(d.Headers[consumer.HeaderStatus], string(d.Body), "replayed:", d.Headers[consumer.HeaderReplayed] == "true")
		case <-time.After(time.Minute):
			log.Fatal("no answer in a minute")
		}
	}
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments made:", made.Load())
	// Output:
	// 201 {"payment":1} replayed: false
	// 201 {"payment":1} replayed: true
	// payments made: 1
}
