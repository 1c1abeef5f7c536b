"""A small upstream for idem-gateway's tests, in another language than the
gateway: it records every request it receives (its path, forwarded
Idempotency-Key, and whether it ran it or answered it from an earlier run)
and answers by path:

  /ok     201 with the number of times it received this key
  /fail   500
  /slow   waits for a line on stdin for the path, then answers 201 (the test
          holds it past the gateway's upstream timeout)
  /die    closes the connection without an answer the first time it gets a
          key, then answers 201
  /cut    the first time it gets a key, sends 201's headers and a part of
          its body, then closes the connection; then answers 201
  /pay/…  runs at once (the effect), then takes 0 to 200 ms to answer 201
  GET /log  the recorded requests, as JSON

With --dedup, a POST whose Idempotency-Key it has answered before gets that
answer again without running, and one whose key is running waits for that
run's answer; a run that gave no answer (500, /die) leaves the key free.
"""
import json
import random
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
log = []          # every request received: {"path", "key"}
answers = {}      # key -> (status, body), with --dedup
running = {}      # key -> threading.Event set when its run ends, with --dedup
dedup = "--dedup" in sys.argv
release = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        b = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        with lock:
            self.answer(200, list(log))

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        key = self.headers.get("Idempotency-Key", "")
        while True:
            with lock:
                answer = answers.get(key) if dedup else None
                busy = running.get(key) if dedup and answer is None else None
                if busy is None:
                    log.append({"path": self.path, "key": key, "ran": answer is None})
                    runs = sum(1 for e in log if e["key"] == key and e["path"] == self.path)
                    if answer is None and dedup:
                        running[key] = threading.Event()
                    break
            busy.wait()
        if answer is not None:
            self.answer(*answer)
            return
        try:
            self.run(key, runs)
        finally:
            if dedup:
                with lock:
                    running.pop(key).set()

    def run(self, key, runs):
        if self.path == "/die" and runs == 1:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if self.path == "/cut" and runs == 1:
            # Acts, then cuts its answer short after the headers.
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b'{"runs"')
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if self.path == "/slow":
            release.wait()
        if self.path.startswith("/pay/"):
            time.sleep(random.uniform(0, 0.2))
        status, body = (500, {"error": "failed"}) if self.path == "/fail" else (201, {"runs": runs})
        if dedup and status < 500:
            with lock:
                answers[key] = (status, body)
        self.answer(status, body)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    threading.Thread(target=lambda: (sys.stdin.readline(), release.set()), daemon=True).start()
    srv.serve_forever()


main()
