// A small upstream for idem-gateway's tests, in Node: it records every
// request it receives (its path, method and forwarded Idempotency-Key) and
// answers each POST 201 with the number of times it received the path and
// key, and headers a replay must keep (X-Request-Id, Cache-Control, Link)
// or drop (Set-Cookie). GET /log returns the recorded requests as JSON.
// It prints its port on stdout.
const http = require("http");

const log = [];
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.method === "GET" && req.url === "/log") {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(log));
      return;
    }
    const key = req.headers["idempotency-key"] || "";
    log.push({ path: req.url, key: key, ran: true });
    const runs = log.filter((e) => e.key === key && e.path === req.url).length;
    res.writeHead(req.method === "POST" ? 201 : 200, {
      "Content-Type": "application/json",
      "X-Request-Id": "node-" + log.length,
      "Cache-Control": "no-store",
      Link: "</v2/orders>; rel=successor-version",
      "Set-Cookie": "session=secret",
    });
    res.end(JSON.stringify({ runs: runs }));
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
