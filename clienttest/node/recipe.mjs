// The Node recipe of docs/clients.md: axios with axios-retry, taught
// idem's answers.
//
// Run by the clienttest module: node recipe.mjs URL AUTHORIZATION BODY TAPS
// sends one operation (one Idempotency-Key) TAPS times at once, as a double
// tap does, and prints what each send saw as one JSON line.
import { randomUUID } from 'node:crypto';
import axios from 'axios';
import axiosRetry, { exponentialDelay, isNetworkError } from 'axios-retry';

export function idemClient() {
  const client = axios.create({ timeout: 120_000 });
  axiosRetry(client, {
    retries: 6,
    // 2ⁿ × 250 ms with jitter, or Retry-After when it says longer.
    retryDelay: (n, error) => exponentialDelay(n, error, 250),
    retryCondition: (error) => {
      const r = error.response;
      if (!r) return isNetworkError(error); // no answer: resend with the same key
      const advice = r.headers['idempotent-should-retry'];
      if (advice) return advice === 'true'; // the server knows: in-flight yes, outcome-unknown no
      return r.status === 408 || r.status === 429 || r.status >= 500;
    },
  });
  return client;
}

async function send(url, headers, body) {
  const client = idemClient();
  let r;
  try {
    r = await client.post(url, body, { headers });
  } catch (error) {
    if (!error.response) return { error: String(error) }; // no answer at all: the outcome is unknown
    r = error.response;
  }
  return {
    status: r.status,
    should_retry: r.headers['idempotent-should-retry'] ?? '',
    replayed: r.headers['idempotent-replayed'] === 'true',
    attempts: (r.config['axios-retry']?.retryCount ?? 0) + 1,
  };
}

const [url, auth, body, taps] = process.argv.slice(2);
const headers = {
  Authorization: auth,
  'Content-Type': 'application/json',
  'Idempotency-Key': randomUUID(), // one key per operation, reused by every send and retry
};
const seen = await Promise.all(Array.from({ length: Number(taps) }, () => send(url, headers, body)));
for (const s of seen) console.log(JSON.stringify(s));
