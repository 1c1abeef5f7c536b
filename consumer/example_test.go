package consumer_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/memstore"
	"github.com/idem-dev/idem/store"
)

// A queue consumer: the broker delivers a command twice, and a poison
// message once. An adapter (idemnats, idemamqp) does what Process decides;
// here the decisions are printed. (memstore stands in for pgstore or
// sqlitestore, whose DB accessor a handler writes through: its writes
// commit with the key's completion, before Process returns Ack.)
func ExampleConsumer() {
	ctx := context.Background()
	mw, err := idem.New(memstore.New(), idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}
	payments := 0
	c, err := consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		if string(m.Body) != `{"amount":100}` {
			return idem.Response{StatusCode: http.StatusBadRequest, Body: []byte(`{"error":"unknown command"}`)} // final: dead-lettered
		}
		payments++
		return idem.Response{StatusCode: http.StatusCreated, Body: fmt.Appendf(nil, `{"id":%d,"amount":100}`, payments)}
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
	fmt.Println("payments:", payments)
	// Output:
	// ack executed 201 {"id":1,"amount":100}
	// ack replayed 201 {"id":1,"amount":100}
	// dead-letter executed 400 {"error":"unknown command"}
	// payments: 1
}

// delivery is one message as a broker client hands it over, with the
// calls that settle it.
type delivery interface {
	Message() *consumer.Message
	Ack() error
	Nak(delay time.Duration) error
	Publish(subject string, m *consumer.Message) error
}

// An adapter of one's own, for a broker without one: process each
// delivery, then settle it as the Decision says, acknowledging only after
// Process returned. (Compiled, not run: the core module holds no broker.
// ExampleConsumer runs a Consumer; idemnats and idemamqp are complete
// adapters.)
func ExampleConsumer_Process() {
	var st store.Store // pgstore.New(pool) or sqlitestore.New(db), migrated
	var deliveries <-chan delivery
	ctx := context.Background()

	mw, err := idem.New(st, idem.Config{Mode: idem.ModeAtomic})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		// pgstore.DB(ctx, pool) is the message's transaction.
		return idem.Response{StatusCode: 201, Body: []byte(`{"ok":true}`)}
	}, consumer.Config{})
	if err != nil {
		log.Fatal(err)
	}

	for dl := range deliveries {
		m := dl.Message()
		d := c.Process(ctx, m)
		switch d.Action {
		case consumer.Retry:
			err = dl.Nak(d.Delay) // nothing it did was committed
		case consumer.DeadLetter:
			dead := &consumer.Message{Subject: "payments.dead", Header: c.DeadLetterHeader(m, d), Body: m.Body}
			if err = dl.Publish(dead.Subject, dead); err == nil {
				err = dl.Ack()
			}
		case consumer.Ack:
			if r := d.Result.Response; r != nil { // the answer, executed or replayed
				err = dl.Publish("payments.results", &consumer.Message{Header: c.ResultHeader(d), Body: r.Body})
			}
			if err == nil {
				err = dl.Ack()
			}
		}
		if err != nil {
			log.Printf("settle %s: %v", m.Subject, err) // redelivered, and answered from the key's record
		}
	}
}
