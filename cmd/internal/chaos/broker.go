package chaos

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Broker is a NATS server with JetStream, embedded from its Go module, that
// can be restarted mid-run: its streams live in files in a temp dir of its
// own, and it comes back on the same loopback port, so the replicas'
// clients reconnect to it as to a restarted production broker.
type Broker struct {
	dir  string
	port int

	mu  sync.Mutex // guards srv
	srv *server.Server
}

// StartBroker starts a broker on a free loopback port (never 4222, where a
// developer's own NATS may run), its files in a new temp dir.
func StartBroker() (*Broker, error) {
	dir, err := os.MkdirTemp("", "idem-chaos-nats-")
	if err != nil {
		return nil, err
	}
	b := &Broker{dir: dir}
	for b.port == 0 || b.port == 4222 {
		if b.port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := b.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

func (b *Broker) start() error {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: b.port, JetStream: true, StoreDir: b.dir,
		NoSigs: true, NoLog: true})
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return errors.New("the embedded NATS server did not start on port " + strconv.Itoa(b.port))
	}
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
	return nil
}

// URL is the broker's client URL; it stays the same across restarts.
func (b *Broker) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(b.port) }

// Restart shuts the broker down, every client connection with it, and
// starts it again on the same files and port after down.
func (b *Broker) Restart(down time.Duration) error {
	b.stop()
	time.Sleep(down)
	return b.start()
}

func (b *Broker) stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Close stops the broker and removes its files.
func (b *Broker) Close() {
	b.stop()
	os.RemoveAll(b.dir)
}
