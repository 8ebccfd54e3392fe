"""A real HTTP server on 127.0.0.1 (a free port) for the service arm's tests: it records every
request body and answers with whatever the test's `respond(body)` returns."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# (status, body): a dict or list is sent as JSON, bytes as they are.
Reply = tuple[int, Any]
Respond = Callable[[dict[str, Any]], Reply]


def travel_ids() -> list[str]:
    """The passage ids of the shipped travel corpus, in file order."""
    with open(ROOT / "corpus" / "travel" / "passages.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["id"] for line in fh if line.strip()]


def labelled_answers(evalset: Path = ROOT / "evalsets" / "travel.jsonl") -> Respond:
    """A service that answers each query of `evalset` with its relevant passages, best first
    (scores 2, 1, ...; nothing for an unlabelled query): what a perfect retriever returns."""
    relevant: dict[str, list[str]] = {}
    with open(evalset, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                relevant[record["query_id"]] = record.get("relevant_ids", [])

    def respond(body: dict[str, Any]) -> Reply:
        ids = relevant[body["query_id"]][: body["top_k"]]
        return 200, {"results": [{"id": pid, "score": len(ids) - r} for r, pid in enumerate(ids)]}

    return respond


@contextmanager
def serve(respond: Respond, drop_idle: bool = False) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(the URL to POST to, the request bodies received so far), while the server runs.
    `drop_idle`: close each connection after its answer without saying so (as a server whose
    keep-alive timeout ran out does)."""
    received: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a production service would
        disable_nagle_algorithm = True  # and without the 40 ms delayed-ACK stall

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                received.append(body)
            status, payload = respond(body)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = drop_idle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that gave up (a timeout test) closed its end: nothing to report

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/search", received
    finally:
        server.shutdown()
        server.server_close()
