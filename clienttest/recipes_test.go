package clienttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/internal/require"
)

// seen is what a client saw of one send of an operation: its final answer
// and how many attempts it took.
type seen struct {
	Status      int    `json:"status"`
	ShouldRetry string `json:"should_retry"`
	Replayed    bool   `json:"replayed"`
	Attempts    int    `json:"attempts"`
	Error       string `json:"error"`
}

// A recipe sends one operation (one Idempotency-Key) taps times at once
// and reports what each send saw on the channel.
type recipe func(t *testing.T, url, auth, body string, taps int) <-chan []seen

var recipes = []struct {
	name string
	run  recipe
}{
	{"PythonRequests", script(python, "python/recipe.py")},
	{"NodeAxios", script("node", "node/recipe.mjs")},
	{"GoRetryablehttp", goRecipe(sendRetryablehttp)},
	{"GoIdemClient", goRecipe(sendIdemClient)},
}

// script is a recipe in another language: a program that takes URL,
// AUTHORIZATION, BODY and TAPS and prints one JSON line per send.
func script(interpreter, file string) recipe {
	return func(t *testing.T, url, auth, body string, taps int) <-chan []seen {
		cmd := exec.Command(interpreter, file, url, auth, body, strconv.Itoa(taps))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		done := make(chan []seen, 1)
		go func() {
			var all []seen
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var s seen
				if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
					s.Error = "not JSON: " + sc.Text()
				}
				all = append(all, s)
			}
			if err := cmd.Wait(); err != nil {
				all = append(all, seen{Error: err.Error() + ": " + stderr.String()})
			}
			done <- all
		}()
		return done
	}
}

// goRecipe runs a Go recipe's send taps times at once, with one key.
func goRecipe(send func(url, auth, key, body string) seen) recipe {
	return func(t *testing.T, url, auth, body string, taps int) <-chan []seen {
		key := client.NewKey() // one key per operation, reused by every send and retry
		done := make(chan []seen, 1)
		go func() {
			all := make([]seen, taps)
			var wg sync.WaitGroup
			for i := range all {
				wg.Go(func() { all[i] = send(url, auth, key, body) })
			}
			wg.Wait()
			done <- all
		}()
		return done
	}
}

// newRetryableClient is the go-retryablehttp recipe of docs/clients.md.
func newRetryableClient() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = 6
	c.RetryWaitMin, c.RetryWaitMax = 250*time.Millisecond, 8*time.Second
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if resp != nil {
			switch resp.Header.Get("Idempotent-Should-Retry") { // the server knows
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err) // no answer: resend with the same key
	}
	c.Backoff = func(min, max time.Duration, n int, resp *http.Response) time.Duration {
		if resp != nil { // DefaultBackoff reads Retry-After on 429 and 503 only, not on idem's 409
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				return time.Duration(s) * time.Second
			}
		}
		return retryablehttp.DefaultBackoff(min, max, n, resp)
	}
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler // the last answer, not an error
	return c
}

func sendRetryablehttp(url, auth, key, body string) seen {
	c := newRetryableClient()
	var attempts int
	c.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, n int) { attempts = n + 1 }
	req, err := retryablehttp.NewRequest(http.MethodPost, url, []byte(body))
	if err != nil {
		return seen{Error: err.Error()}
	}
	setHeaders(req.Header, auth, key)
	resp, err := c.Do(req)
	return result(resp, err, attempts)
}

// sendIdemClient is the recipe with idem's own client package: its
// Transport retries what the recipes above are taught to.
func sendIdemClient(url, auth, key, body string) seen {
	var attempts int
	hc := &http.Client{Transport: &client.Transport{AttemptFunc: func(client.Attempt) { attempts++ }}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return seen{Error: err.Error()}
	}
	setHeaders(req.Header, auth, key)
	resp, err := hc.Do(req)
	return result(resp, err, attempts)
}

func setHeaders(h http.Header, auth, key string) {
	h.Set("Authorization", auth)
	h.Set("Content-Type", "application/json")
	h.Set("Idempotency-Key", key)
}

func result(resp *http.Response, err error, attempts int) seen {
	if err != nil {
		return seen{Error: err.Error(), Attempts: attempts}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return seen{Status: resp.StatusCode, ShouldRetry: resp.Header.Get("Idempotent-Should-Retry"),
		Replayed: resp.Header.Get("Idempotent-Replayed") == "true", Attempts: attempts}
}
