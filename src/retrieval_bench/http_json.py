"""POST JSON to an HTTP service and read its JSON answer: keep-alive connections per worker
thread, a timeout per attempt, and retries of what another attempt may answer differently.

Shared by every client of an outside service, so each behaves the same under the same faults:
the service arm (`retrievers.service`: a production retriever) and the model judge
(`judge.openai`: an OpenAI-compatible chat-completions endpoint). A caller makes one
`Connections` per batch of requests, runs its requests on `concurrency` threads, and wraps each
request's attempts in `with_retries`; what an attempt could not use is an `AttemptFailed` with
a `kind` the caller counts (`timeout`, `connection`, `http_<status>`, `malformed_json`, or the
caller's own kinds for answers it cannot read).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")

# Answers another attempt may change: rate limited, or the server (or a proxy) failing.
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
# How much of an unusable answer a message quotes.
BODY_SNIPPET = 200


class AttemptFailed(Exception):
    """One attempt's failure: `kind` is counted by the caller; `retry` says whether another
    attempt may answer differently (timeouts, connection errors, 429 and 5xx do)."""

    def __init__(self, kind: str, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry


class Connections:
    """Keep-alive connections to one URL, one per worker thread (an http.client connection
    serves one request at a time), all closed when the batch ends.

    The standard library's client rather than httpx: it costs a third of httpx's CPU per
    request (0.23 s against 0.6 s for 1,000 requests here), and under the GIL that CPU, not the
    service, bounds how close `concurrency` requests in flight get to the ideal
    (BENCHMARKS.md). Proxies from the environment are not used."""

    def __init__(
        self, url: str, timeout_s: float, headers: Mapping[str, str] | None = None
    ) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.port = parts.port
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.context = ssl.create_default_context() if parts.scheme == "https" else None
        self.timeout_s = timeout_s
        self.headers = {**JSON_HEADERS, **(headers or {})}
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.closed = threading.Event()

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self.context is not None:
                conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout_s, context=self.context
                )
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def post(self, data: bytes) -> tuple[int, str, bytes]:
        """(status, reason, body) of one POST. A kept-alive connection the server closed while
        it was idle is reopened once and the request sent again (the callers' requests change
        nothing on the server); any other error closes the connection (the next request opens
        a new one) and rises."""
        conn = self._connection()
        kept_alive = conn.sock is not None
        try:
            return self._send(conn, data)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            conn.close()
            if not kept_alive:
                raise
            try:
                return self._send(conn, data)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            conn.close()
            raise

    def _send(self, conn: http.client.HTTPConnection, data: bytes) -> tuple[int, str, bytes]:
        conn.request("POST", self.target, body=data, headers=self.headers)
        response = conn.getresponse()
        return response.status, response.reason, response.read()

    def close(self) -> None:
        """End every connection, those with a request in flight too (a failed request or
        Ctrl-C does not wait out the others' timeouts); `closed` tells workers not to retry."""
        self.closed.set()
        with self._lock:
            for conn in self._opened:
                if conn.sock is not None:
                    with contextlib.suppress(OSError):
                        conn.sock.shutdown(socket.SHUT_RDWR)
                conn.close()


def post_json(connections: Connections, body: bytes, timeout_key: str) -> Any:
    """One attempt: the answer parsed as JSON, or `AttemptFailed` (`timeout_key` names the
    setting a timeout message points to, e.g. `arms.service.timeout_s=30`)."""
    try:
        status, reason, content = connections.post(body)
    except TimeoutError as exc:
        raise AttemptFailed("timeout", f"no answer within {timeout_key} s", retry=True) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise AttemptFailed(
            "connection", f"cannot reach the service: {type(exc).__name__}: {exc}", retry=True
        ) from exc
    snippet = content[:BODY_SNIPPET].decode("utf-8", "replace").strip()
    if status != 200:
        raise AttemptFailed(
            f"http_{status}",
            f"HTTP {status} {reason}: {snippet!r}",
            retry=status in RETRIED_STATUSES,
        )
    try:
        return json.loads(content)
    except ValueError as exc:
        raise AttemptFailed(
            "malformed_json", f"the answer is not JSON ({exc}): {snippet!r}"
        ) from exc


def with_retries(
    attempt: Callable[[], T], retries: int, backoff_s: float, closed: threading.Event
) -> tuple[T | None, AttemptFailed | None, int]:
    """(result, None, attempts) of the first attempt that succeeds, or (None, the last
    failure, attempts): a failure marked `retry` is tried again up to `retries` more times,
    waiting `backoff_s` doubled each time, unless the batch was `closed` meanwhile."""
    attempts = 0
    while True:
        attempts += 1
        try:
            return attempt(), None, attempts
        except AttemptFailed as failed:
            if failed.retry and attempts <= retries and not closed.is_set():
                time.sleep(backoff_s * 2 ** (attempts - 1))
                continue
            if attempts > 1:
                failed = AttemptFailed(failed.kind, f"{failed} (after {attempts} attempts)")
            return None, failed, attempts
