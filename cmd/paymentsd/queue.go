package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/dburl"
	"github.com/idem-dev/idem/consumer"
	"github.com/idem-dev/idem/idemamqp"
	"github.com/idem-dev/idem/idemnats"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/payments/api"
	"github.com/idem-dev/idem/store"
)

// The commands paymentsd consumes (docs/queues.md): one subject (NATS) or
// queue (RabbitMQ) per operation, named after its HTTP route.
const (
	commandPrefix     = "payments.commands."
	resultSubject     = "payments.results"
	replyPrefix       = resultSubject + "." // where a command's Reply-To (reply-to) may point
	deadLetterSubject = "payments.deadletter"
	natsStream        = "PAYMENTS"
	natsDeadStream    = "PAYMENTS_DEADLETTER"
	natsDurable       = "paymentsd"
)

// connectTimeout bounds the broker's first answer; nats.go's 2 s default
// is short for a broker across a WAN or on a busy machine.
const connectTimeout = 10 * time.Second

// setupTimeout bounds the making of the streams and the consumer at start,
// where nats.go's 5 s default for a JetStream request is short for a
// cluster electing a leader or a busy machine.
const setupTimeout = 30 * time.Second

var commandSubjects = []string{commandPrefix + string(api.OpDeposit), commandPrefix + string(api.OpTransaction)}

// commands is the consumer of payment commands: a message's body is the
// HTTP request's, its user the owner of the API key in its Authorization
// header, its fingerprint the HTTP request's, so a key is one effect
// whether it comes over HTTP or as a message.
func commands(mw *idem.Middleware, ops *api.Operations) (*consumer.Consumer, error) {
	op := func(m *consumer.Message) api.Operation {
		return api.Operation(strings.TrimPrefix(m.Subject, commandPrefix))
	}
	return consumer.New(mw, func(ctx context.Context, m *consumer.Message) idem.Response {
		return ops.Run(ctx, op(m), idem.ScopeFromContext(ctx), m.Body)
	}, consumer.Config{
		Header: mw.Config().Header,
		ScopeFunc: func(ctx context.Context, m *consumer.Message) (string, error) {
			user, err := ops.Authenticate(ctx, m.Header.Values("Authorization"))
			if errors.Is(err, payments.ErrUnauthorized) {
				return "", nil // dead-lettered with 401
			}
			return user, err
		},
		FingerprintFunc: func(m *consumer.Message) (store.Fingerprint, error) { return ops.Fingerprint(op(m), m.Body) },
		ReplyPrefix:     replyPrefix,
	})
}

// natsInboxPrefix is where paymentsd's inboxes live, its pull consumer's
// deliveries among them: a prefix of its own, which broker permissions
// let no producer read (docs/queues.md).
const natsInboxPrefix = "_INBOX_paymentsd"

// consumeNATS consumes the commands from JetStream at url until ctx ends,
// making the streams (with replicas copies each) if missing and the
// durable consumer. wait returns once the messages in hand are settled.
func consumeNATS(ctx context.Context, url string, replicas int, c *consumer.Consumer, workers int, logger *slog.Logger) (wait func(), err error) {
	nc, err := nats.Connect(url, nats.Name("paymentsd"), nats.MaxReconnects(-1), nats.Timeout(connectTimeout), nats.CustomInboxPrefix(natsInboxPrefix))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", dburl.Display(url), dburl.ScrubError(err, url))
	}
	if err := natsVersionCheck(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats %s: %w", dburl.Display(url), dburl.ScrubError(err, url))
	}
	cons, js, err := natsConsumer(ctx, nc, replicas, logger)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats %s: %w", dburl.Display(url), dburl.ScrubError(err, url))
	}
	ic, err := idemnats.New(c, js, idemnats.Config{ResultSubject: resultSubject, DeadLetterSubject: deadLetterSubject, Workers: workers, Logger: logger})
	if err != nil {
		nc.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer nc.Close()
		if err := ic.Run(ctx, cons); err != nil {
			logger.Error("nats consumer stopped", "err", err)
		}
	}()
	logger.Info("consuming commands", "broker", "nats", "stream", natsStream, "durable", natsDurable)
	return func() { <-done }, nil
}

// natsVersionCheck fails, in one line, on a server older than 2.10: the
// durable consumer filters several subjects, which older servers refuse
// with "multiple consumer filter subjects not supported".
func natsVersionCheck(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err == nil && (major < 2 || major == 2 && minor < 10) {
		return fmt.Errorf("nats-server %s is too old: the queue door needs nats-server 2.10 or later", v)
	}
	return nil
}

// natsConsumer makes the streams if missing, with replicas copies each,
// and the durable consumer, whose copies are its stream's. PAYMENTS is a
// work queue: JetStream deletes a command once it is acknowledged or
// terminated, so no command (nor its Authorization header) outlives its
// processing. A stream made before keeps its own retention and replicas,
// and a warning says so.
func natsConsumer(ctx context.Context, nc *nats.Conn, replicas int, logger *slog.Logger) (jetstream.Consumer, jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	for _, s := range []jetstream.StreamConfig{
		{Name: natsStream, Subjects: commandSubjects, Retention: jetstream.WorkQueuePolicy, Replicas: replicas},
		{Name: natsDeadStream, Subjects: []string{deadLetterSubject}, Replicas: replicas},
	} {
		_, err := js.CreateStream(ctx, s)
		switch {
		case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
			old, err := js.Stream(ctx, s.Name)
			if err != nil {
				return nil, nil, fmt.Errorf("stream %s: %w", s.Name, err)
			}
			if cfg := old.CachedInfo().Config; cfg.Retention != s.Retention && cfg.MaxAge == 0 {
				logger.Warn("the stream keeps acknowledged commands, their Authorization headers included, for ever: "+
					"recreate it once drained (nats stream rm), and paymentsd makes it a work queue (docs/queues.md)",
					"stream", s.Name, "retention", cfg.Retention.String())
			}
			if cfg := old.CachedInfo().Config; cfg.Replicas != s.Replicas {
				logger.Warn("the stream keeps another number of copies than --nats-replicas: "+
					"change it with nats stream edit --replicas (docs/queues.md)",
					"stream", s.Name, "replicas", cfg.Replicas, "nats_replicas", s.Replicas)
			}
		case err != nil:
			return nil, nil, fmt.Errorf("create stream %s: %w", s.Name, err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, natsStream, jetstream.ConsumerConfig{
		Durable: natsDurable, AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: commandSubjects,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create consumer %s: %w", natsDurable, err)
	}
	return cons, js, nil
}

// consumeAMQP consumes the commands from RabbitMQ at url until ctx ends,
// declaring the queues (quorum queues) if missing, and connecting again
// when the connection is lost. wait returns once the deliveries in hand
// are settled.
func consumeAMQP(ctx context.Context, url string, c *consumer.Consumer, workers int, logger *slog.Logger) (wait func(), err error) {
	conn, err := amqpConnect(url)
	if err != nil {
		return nil, err
	}
	ac, err := idemamqp.New(c, conn, idemamqp.Config{
		ResultQueue: resultSubject, DeadLetterQueue: deadLetterSubject, Workers: workers, Logger: logger,
		Redial: func(context.Context) (*amqp.Connection, error) { return amqpConnect(url) },
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	var wg sync.WaitGroup
	for _, q := range commandSubjects {
		wg.Go(func() {
			if err := ac.Run(ctx, q); err != nil {
				logger.Error("rabbitmq consumer stopped", "queue", q, "err", err)
			}
		})
	}
	logger.Info("consuming commands", "broker", "rabbitmq", "queues", strings.Join(commandSubjects, ","))
	return func() {
		wg.Wait()
		_ = ac.Close()
	}, nil
}

// amqpConnect dials url and declares the queues.
func amqpConnect(url string) (*amqp.Connection, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq %s: %w", dburl.Display(url), dburl.ScrubError(err, url))
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	defer ch.Close()
	for _, q := range append([]string{resultSubject, deadLetterSubject}, commandSubjects...) {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("rabbitmq: declare %s: %w", q, err)
		}
	}
	return conn, nil
}

// startConsumers starts a consumer of commands for each broker the flags
// name, adding to waits what waits for it to stop (it stops with ctx).
func startConsumers(ctx context.Context, f serveFlags, mw *idem.Middleware, cfg api.Config, logger *slog.Logger, waits *[]func()) error {
	if f.natsURL == "" && f.amqpURL == "" {
		return nil
	}
	ops, err := api.NewOperations(cfg)
	if err != nil {
		return err
	}
	c, err := commands(mw, ops)
	if err != nil {
		return err
	}
	for _, b := range []struct {
		url     string
		consume func(context.Context, string, *consumer.Consumer, int, *slog.Logger) (func(), error)
	}{{f.natsURL, func(ctx context.Context, url string, c *consumer.Consumer, workers int, logger *slog.Logger) (func(), error) {
		return consumeNATS(ctx, url, f.natsReplicas, c, workers, logger)
	}}, {f.amqpURL, consumeAMQP}} {
		if b.url == "" {
			continue
		}
		wait, err := b.consume(ctx, b.url, c, f.queueWorkers, logger)
		if err != nil {
			return err
		}
		*waits = append(*waits, wait)
	}
	return nil
}
