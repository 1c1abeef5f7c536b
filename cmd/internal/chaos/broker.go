package chaos

import (
	"github.com/idem-dev/idem/cmd/internal/freeport"

	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// natsReady matches a nats-server's line once it takes clients:
// "[INF] Listening for client connections on 127.0.0.1:4222".
var natsReady = regexp.MustCompile(`Listening for client connections on (\S+)`)

// Broker is a JetStream cluster of nats-server processes on loopback, the
// server built from its Go module at the version go.mod names: a node is
// SIGKILLed and started again on the same files, ports and server name,
// as a crashed production node is, and rejoins its cluster.
type Broker struct {
	dir   string
	nodes []*natsNode
}

// natsNode is one server of the cluster.
type natsNode struct {
	name                  string
	client, route, health int // loopback ports, the same across restarts
	proc                  *Replica
}

// StartBroker starts a cluster of n nats-server processes (the binary
// bin) with JetStream, their files in a new temp dir and their logs in
// logDir, on free loopback ports (never 4222, where a developer's own
// NATS may run), and waits until every node is current with the
// cluster's meta leader.
func StartBroker(ctx context.Context, bin, logDir string, n int) (*Broker, error) {
	dir, err := os.MkdirTemp("", "idem-chaos-nats-")
	if err != nil {
		return nil, err
	}
	b := &Broker{dir: dir}
	var routes []string
	for i := range n {
		nd := &natsNode{name: fmt.Sprintf("n%d", i+1)}
		for _, p := range []*int{&nd.client, &nd.route, &nd.health} {
			for *p == 0 || *p == 4222 {
				if *p, err = freeport.Loopback(); err != nil {
					os.RemoveAll(dir)
					return nil, err
				}
			}
		}
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(nd.route))
		b.nodes = append(b.nodes, nd)
	}
	for _, nd := range b.nodes {
		args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(nd.client), "-m", strconv.Itoa(nd.health),
			"-n", nd.name, "-js", "-sd", filepath.Join(dir, nd.name),
			"--cluster_name", "idem-chaos", "--cluster", "nats://127.0.0.1:" + strconv.Itoa(nd.route),
			"--routes", strings.Join(routes, ",")}
		nd.proc = &Replica{Slot: -1, bin: bin, args: args, log: filepath.Join(logDir, "nats-"+nd.name+".log"), ready: natsReady}
	}
	for _, nd := range b.nodes {
		if err := nd.proc.StartRetrying(ctx, 30*time.Second); err != nil {
			b.Close()
			return nil, fmt.Errorf("nats-server %s: %w\n%s", nd.name, err, nd.proc.LogTail(10))
		}
	}
	for _, nd := range b.nodes {
		if err := nd.waitHealthy(ctx, time.Minute); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// waitHealthy waits until the node's /healthz answers 200: JetStream is
// up and current with the meta leader and with its streams' leaders.
func (nd *natsNode) waitHealthy(ctx context.Context, d time.Duration) error {
	url := "http://127.0.0.1:" + strconv.Itoa(nd.health) + "/healthz"
	deadline := time.Now().Add(d)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(fmt.Errorf("nats-server %s: not healthy (%s) after %s\n%s", nd.name, url, d, nd.proc.LogTail(10)), ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL is the cluster's client URL, every node's address comma-separated
// (as nats.Connect and paymentsd's --nats-url take it); it stays the same
// across restarts.
func (b *Broker) URL() string { return strings.Join(b.NodeURLs(), ",") }

// NodeURLs are each node's client URL.
func (b *Broker) NodeURLs() []string {
	urls := make([]string, len(b.nodes))
	for i, nd := range b.nodes {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(nd.client)
	}
	return urls
}

// Nodes is how many servers the cluster has.
func (b *Broker) Nodes() int { return len(b.nodes) }

// Names are the nodes' server names, as JetStream names a stream's leader.
func (b *Broker) Names() []string {
	names := make([]string, len(b.nodes))
	for i, nd := range b.nodes {
		names[i] = nd.name
	}
	return names
}

// Kill SIGKILLs the node named name.
func (b *Broker) Kill(name string) error {
	nd, err := b.node(name)
	if err == nil && !nd.proc.Kill() {
		err = fmt.Errorf("nats-server %s was not running", name)
	}
	return err
}

// Restart starts the node named name again on the same files and ports,
// and waits until it is current with the cluster again, so that the next
// kill never takes a second node of three.
func (b *Broker) Restart(ctx context.Context, name string) error {
	nd, err := b.node(name)
	if err != nil {
		return err
	}
	if err := nd.proc.StartRetrying(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("nats-server %s: %w\n%s", name, err, nd.proc.LogTail(10))
	}
	return nd.waitHealthy(ctx, time.Minute)
}

func (b *Broker) node(name string) (*natsNode, error) {
	for _, nd := range b.nodes {
		if nd.name == name {
			return nd, nil
		}
	}
	return nil, fmt.Errorf("no nats-server named %q", name)
}

// Close stops every node and removes their files.
func (b *Broker) Close() {
	for _, nd := range b.nodes {
		nd.proc.Kill()
	}
	os.RemoveAll(b.dir)
}
