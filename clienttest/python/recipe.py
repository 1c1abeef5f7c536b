"""The Python recipe of docs/clients.md: requests, with urllib3's Retry
taught idem's answers.

Run by the clienttest module: recipe.py URL AUTHORIZATION BODY TAPS
sends one operation (one Idempotency-Key) TAPS times at once, as a double
tap does, and prints what each send saw as one JSON line.
"""
import json
import sys
import threading
import uuid

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.util.retry import Retry


class IdemRetry(Retry):
    """Retries 408, 429, 5xx and idem's in-flight 409 after Retry-After;
    never an answer the server calls final (Idempotent-Should-Retry: false),
    such as the gateway's outcome-unknown 409."""

    def is_retry(self, method, status_code, has_retry_after=False):
        if status_code == 409 and not has_retry_after:
            return False  # a business rule's 409, or outcome-unknown: final
        return super().is_retry(method, status_code, has_retry_after)

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        if response is not None and response.headers.get("Idempotent-Should-Retry") == "false":
            # Final: with raise_on_status=False the caller gets this answer.
            raise MaxRetryError(_pool, url, ResponseError("final answer"))
        return super().increment(method, url, response, error, _pool, _stacktrace)


def idem_session():
    retry = IdemRetry(
        total=6,
        allowed_methods=None,  # POST too: the key makes a resend safe
        status_forcelist=(408, 409, 429, 500, 502, 503, 504),
        backoff_factor=0.25,  # 0.25 s, 0.5 s, 1 s, … when there is no Retry-After
        respect_retry_after_header=True,
        raise_on_status=False,  # the last answer is returned, not raised
    )
    s = requests.Session()
    s.mount("http://", HTTPAdapter(max_retries=retry))
    s.mount("https://", HTTPAdapter(max_retries=retry))
    return s


def send(url, headers, body):
    """One send of the operation; what it saw."""
    try:
        r = idem_session().post(url, data=body, headers=headers, timeout=120)
    except requests.RequestException as e:  # no answer at all: the outcome is unknown
        return {"error": str(e)}
    return {
        "status": r.status_code,
        "should_retry": r.headers.get("Idempotent-Should-Retry", ""),
        "replayed": r.headers.get("Idempotent-Replayed") == "true",
        "attempts": len(r.raw.retries.history) + 1,
    }


def main():
    url, auth, body, taps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    headers = {
        "Authorization": auth,
        "Content-Type": "application/json",
        "Idempotency-Key": str(uuid.uuid4()),  # one key per operation, reused by every send and retry
    }
    seen = [None] * taps

    def tap(i):
        seen[i] = send(url, headers, body)

    threads = [threading.Thread(target=tap, args=(i,)) for i in range(taps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in seen:
        print(json.dumps(s), flush=True)


main()
