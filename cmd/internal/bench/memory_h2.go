package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/idem-dev/idem/cmd/internal/paymentsv1"
)

// The loads of the memory run that attack before authentication: header
// blocks that never end, and gRPC calls whose message or metadata is held
// by the transport before any handler runs.

// attackHold bounds how long an attack's connections wait for the server
// to answer or close them once their bytes are sent.
const attackHold = time.Minute

// headerFlood: 1,024 connections each send a request line and 1 MB of
// header lines, never ending the block, and wait until the server answers
// or closes them; an honest deposit is made once every connection has
// sent its bytes (or been refused).
func headerFlood(ctx context.Context, base string, users []user) error {
	addr := strings.TrimPrefix(base, "http://")
	line := []byte("X-Pad: " + strings.Repeat("x", 990) + "\r\n")
	stop := attack(ctx, addr, 1024, func(conn net.Conn, sent func()) {
		if _, err := fmt.Fprintf(conn, "POST /v1/deposits HTTP/1.1\r\nHost: %s\r\n", addr); err != nil {
			return
		}
		for n := 0; n < 1_000_000; n += len(line) {
			if _, err := conn.Write(line); err != nil {
				break // answered 431 and closed
			}
		}
		sent()
		_, _ = io.Copy(io.Discard, conn) // until the server closes it
	})
	defer stop()
	if err := honestDeposit(ctx, base, users[0]); err != nil {
		return fmt.Errorf("honest deposit during the flood: %w", err)
	}
	return nil
}

// attack dials n connections to addr, each running fn, which calls sent
// once its bytes are out, for at most attackHold. It returns once every
// connection has sent (or failed), with stop, which closes them all and
// waits for their fn.
func attack(ctx context.Context, addr string, n int, fn func(conn net.Conn, sent func())) (stop func()) {
	var sent, wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	sent.Add(n)
	for range n {
		wg.Go(func() {
			once := sync.OnceFunc(sent.Done)
			defer once()
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			defer conn.Close()
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			_ = conn.SetDeadline(time.Now().Add(attackHold))
			fn(conn, once)
		})
	}
	waitOrTimeout(&sent, attackHold)
	return func() {
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// grpcStalls: 1,200 CreateDeposit calls with an unknown API key, over
// HTTP/2 without TLS (as grpc-go's clients speak it), each announcing a
// 1 MiB message and sending all of it but the last byte; an honest gRPC
// deposit is made once each call has sent its bytes or been answered.
func grpcStalls(ctx context.Context, addr string, users []user) error {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	hold, release := context.WithCancel(ctx)
	defer release()
	msg := make([]byte, 5+1<<20-1)
	binary.BigEndian.PutUint32(msg[1:5], 1<<20)
	var sent, wg sync.WaitGroup
	sent.Add(1200)
	for range 1200 {
		wg.Go(func() {
			once := sync.OnceFunc(sent.Done)
			defer once()
			pr, pw := io.Pipe()
			go func() {
				_, err := pw.Write(msg)
				once() // every byte but the last, or the call was answered
				if err == nil {
					<-hold.Done()
				}
				pw.CloseWithError(errors.New("attack over"))
			}()
			req, err := http.NewRequestWithContext(hold, http.MethodPost, "http://"+addr+paymentsv1.Payments_CreateDeposit_FullMethodName, pr)
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			req.Header.Set("Authorization", "Bearer sk_unknown")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			pr.CloseWithError(errors.New("answered")) // the writer stops
		})
	}
	waitOrTimeout(&sent, attackHold)
	herr := honestGRPC(ctx, addr, users[0])
	release()
	wg.Wait()
	return herr
}

// grpcMetadata: 200 CreateDeposit calls, 20 on each of 10 connections,
// each with 2 MB of metadata (256 headers of 8 KB) and no message; an
// honest gRPC deposit is made once every block is sent or refused.
func grpcMetadata(ctx context.Context, addr string, users []user) error {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: addr},
		{Name: ":path", Value: paymentsv1.Payments_CreateDeposit_FullMethodName}, {Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"}, {Name: "authorization", Value: "Bearer " + users[1].apiKey},
	}
	for i := range 256 {
		fields = append(fields, hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: strings.Repeat("x", 8000), Sensitive: true})
	}
	for _, f := range fields {
		_ = enc.WriteField(f)
	}
	stop := attack(ctx, addr, 10, func(conn net.Conn, sent func()) {
		fr := http2.NewFramer(conn, conn)
		read := make(chan struct{})
		go func() { // the server's frames, read so that it never blocks on them
			defer close(read)
			for {
				if _, err := fr.ReadFrame(); err != nil {
					return
				}
			}
		}()
		if _, err := io.WriteString(conn, http2.ClientPreface); err != nil || fr.WriteSettings() != nil {
			return
		}
		for s := range 20 {
			if writeHeaderBlock(fr, uint32(2*s+1), block.Bytes()) != nil {
				break
			}
		}
		sent()
		<-read // until the server closes the connection, or stop does
	})
	herr := honestGRPC(ctx, addr, users[0])
	stop()
	return herr
}

// writeHeaderBlock writes block as stream id's HEADERS and CONTINUATION
// frames of 16 KiB, the stream left open.
func writeHeaderBlock(fr *http2.Framer, id uint32, block []byte) error {
	first := min(len(block), 16<<10)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first], EndHeaders: first == len(block)}); err != nil {
		return err
	}
	for rest := block[first:]; len(rest) > 0; {
		n := min(len(rest), 16<<10)
		if err := fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// waitOrTimeout waits for wg, at most d.
func waitOrTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
