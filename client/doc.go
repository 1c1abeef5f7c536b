// Package client is the calling side of idempotency: an [http.RoundTripper]
// that makes any [http.Client] retry unsafe requests safely against a
// server that honours an Idempotency-Key (the idem middleware, paymentsd,
// Stripe-style APIs).
//
//	hc := &http.Client{Transport: &client.Transport{}}
//	resp, err := hc.Post(url, "application/json", body) // keyed, retried, rewound
//	if err == nil && client.Replayed(resp) { … }         // the answer of an earlier attempt
//
// What [Transport] does, with its defaults (each one a field):
//
//   - Keys. A request whose method is not safe in the sense of RFC 9110
//     (anything but GET, HEAD, OPTIONS and TRACE: POST, PUT, PATCH, DELETE and
//     any extension method) and that has no Idempotency-Key gets one: a
//     UUIDv7 from crypto/rand ([NewKey]). Every retry of the request sends the
//     same key. The caller's request is never modified. Safe requests are
//     retried too, without a key.
//   - What is retried: a connection refused, reset or closed before the
//     whole response arrived (the response body is read by the transport, see
//     below), an attempt past [Transport.AttemptTimeout] (30 s), and the
//     statuses 408, 429, 5xx, and 409 when it carries Retry-After (the idem
//     middleware's in-flight and lease-lost). Every other status is final
//     and returned at once: 400, 401, 402, 403, 404, 413, 415, 422, a 409
//     without Retry-After (a business rule's refusal, idem-gateway's
//     outcome-unknown), and all others. A response with
//     Idempotent-Should-Retry (the idem middleware, paymentsd and
//     idem-gateway send it with every problem) is retried when it says
//     true and returned when it says false, whatever its status: a stored
//     500 response-too-large is not sent again.
//   - When: attempt n+1 waits a random duration between 0 and
//     min([Transport.MaxDelay] (8 s), [Transport.BaseDelay] (250 ms) × 2ⁿ⁻¹)
//     ("full jitter"). A Retry-After (seconds or an HTTP date) replaces that
//     wait, plus up to BaseDelay of jitter, when it is at most
//     [Transport.MaxRetryAfter] (60 s); a longer one ends the retries.
//   - Until: [Transport.MaxAttempts] (4) attempts, or the request's context:
//     no attempt starts that would begin after the context's deadline (set it
//     with context.WithTimeout or http.Client.Timeout), and a cancelled
//     context ends the retries. The last attempt's response is returned, or,
//     when it had none, a [*RetryError] with the key and the attempt count.
//   - Bodies: a request's body is sent again with GetBody (which
//     http.NewRequest sets for bytes, strings and their readers). A body
//     without GetBody is buffered up to [Transport.MaxBodyBytes] (1 MiB); a
//     longer one is streamed once and never retried. A response is read whole
//     before it is returned, up to [Transport.MaxResponseBytes] (1 MiB), so
//     that a body cut mid-way is retried with the same key rather than
//     handed to the caller broken; a longer response is returned as it
//     streams and never retried.
//
// The attempts are this transport's, not all the sends: the transport below
// it (http.DefaultTransport by default) sends a request once more on its own
// when a reused keep-alive connection turns out closed before any of the
// response arrived, if the request is idempotent in net/http's sense (it has
// GetBody and an Idempotency-Key, as a keyed request with a buffered body has,
// or a safe method). That second send is inside one attempt:
// [Transport.AttemptFunc] sees one attempt, and [Transport.MaxAttempts] does not count it. The key
// makes it as safe as a retry. A wrapper around [Transport.Base] does not see
// it either; net/http/httptrace does (GotConn is called for each send).
//
// A server's answer to a retry may be the stored answer of an earlier
// attempt: [Replayed] says so. Problem responses (RFC 9457) become Go
// errors (a [*Problem]) with [ResponseError].
package client
