package consumer_test

import (
	"context"
	"log"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/store"
)

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
// Process returned. (Compiled, not run: the core module holds no store and
// no broker. sqlitestore's Example_consumer runs a Consumer; idemnats and
// idemamqp are complete adapters.)
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
