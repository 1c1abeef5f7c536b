// The benchmark's upstream in Node: what the trivial server's bare wiring
// does in Go, as a payment service written in Node would do it. POST
// /v1/things decodes a small JSON body, runs one INSERT into bench_trivial
// (autocommit: one durable commit) and answers 201 with the row; GET
// /healthz answers 200; GET /roundtrips answers its count of queries, each
// one round trip to PostgreSQL (node-postgres sends a query with
// parameters as one message flight).
//
//	node upstream.mjs HOST:PORT POSTGRES_URL SCHEMA
//
// It needs node-postgres (npm's pg), which the benchmark installs beside
// this file before it starts it.
import http from 'node:http';
import pg from 'pg';

const [addr, url, schema] = process.argv.slice(2);
const i = addr.lastIndexOf(':');
const pool = new pg.Pool({ connectionString: url, max: 20, options: `-c search_path=${schema}` });
let trips = 0;

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200);
    res.end(req.url === '/roundtrips' ? String(trips) : '');
    return;
  }
  if (req.method !== 'POST' || req.url !== '/v1/things') {
    res.writeHead(404);
    res.end();
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    let t;
    try {
      t = JSON.parse(Buffer.concat(chunks).toString());
    } catch {
      res.writeHead(400);
      res.end('bad body\n');
      return;
    }
    try {
      trips++;
      const r = await pool.query('INSERT INTO bench_trivial (user_id, amount, note) VALUES ($1, $2, $3) RETURNING id',
        [req.headers['x-user-id'] ?? '', t.amount, t.note]);
      const id = r.rows[0].id;
      res.writeHead(201, { 'Content-Type': 'application/json', Location: '/v1/things/' + id });
      res.end(JSON.stringify({ id: Number(id), amount: t.amount, note: t.note }) + '\n');
    } catch {
      res.writeHead(503);
      res.end('insert failed\n');
    }
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(addr.slice(i + 1)), addr.slice(0, i));
process.on('SIGTERM', () => server.close(() => pool.end().then(() => process.exit(0))));
