"""`python -m run.example_service [--background | --stop] [OVERRIDE ...]`: a retriever service
to try `retriever=service` with, on 127.0.0.1.

It answers the service protocol (docs/how-to/http-service.md): a POST of
`{"query", "query_id", "top_k", "user_role"}` gets `{"results": [{"id", "score"}, ...]}`, best
first, ranked by the project's own BM25 arm over the corpus of the dataset the overrides name
(`dataset=travel`, the default; any `python -m run` override, e.g. `dataset=policy
arms.bm25.k1=1.2`).

    python -m run.example_service --background   # prints its URL, writes it to --url-file
    python -m run retriever=service arms.service.url=$(cat outputs/example-service.url)
    python -m run.example_service --stop

Without `--background` it serves in the foreground until Ctrl-C (or SIGTERM). With it, the
service starts as a process of its own (its log beside the URL file), and the command returns
once the service answers; `--stop` ends it. The port is a free one unless `--port` names one.

An example, not a production server: one process (the standard library's threading HTTP
server), no access rules (`user_role` is read and ignored: every passage may be returned, so
the job's `leak@K` shows what a service without them lets through).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from retrieval_bench.errors import EXIT_OK, BenchError, ConfigError
from run.exits import guarded

DEFAULT_URL_FILE = Path("outputs") / "example-service.url"
# How long --background waits for the service to answer before giving up, and --stop for it
# to end: a bound on a shared machine, not an expected time.
START_WAIT_S = 300.0
STOP_WAIT_S = 30.0


class Ranker:
    """The BM25 arm of the composed config over its dataset's corpus: query text -> ids."""

    def __init__(self, overrides: Sequence[str]) -> None:
        from retrieval_bench.api import compose
        from retrieval_bench.job.build import arm_spec
        from retrieval_bench.job.runner import load_configured
        from retrieval_bench.paths import resolve_output
        from retrieval_bench.protocols import BuildContext
        from retrieval_bench.tiebreak import shared_tie_break

        cfg = compose([*overrides, "retriever=bm25"])
        dataset = load_configured(cfg)
        self.name = dataset.name
        self.ids = [p.id for p in dataset.passages]
        ctx = BuildContext(
            passages=dataset.passages,
            queries=dataset.queries,
            cfg=cfg,
            tie_break=shared_tie_break(self.ids),
            cache_dir=resolve_output(cfg.cache_dir),
            entities=dataset.entities,
        )
        self.arm = arm_spec("bm25", cfg.arms["bm25"]).build("bm25", ctx)

    def search(self, query_id: str, text: str, k: int) -> list[dict[str, Any]]:
        from retrieval_bench.records import EvalQuery

        query = EvalQuery(query_id, text, "unknown", "reviewed")
        [ranked] = self.arm.search([query], k, [None])
        return [
            {"id": self.ids[i], "score": float(s)}
            for i, s in zip(ranked.indices.tolist(), ranked.scores.tolist(), strict=True)
        ]


def make_server(ranker: Ranker, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:`port` (0: a free one) answering the service protocol."""
    lock = threading.Lock()  # one search at a time: the arm is not made for concurrent calls

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                k = body.get("top_k", 10)
                if not isinstance(body.get("query"), str) or not isinstance(k, int) or k < 1:
                    raise ValueError("expected {query: string, top_k: positive integer, ...}")
                with lock:
                    results = ranker.search(str(body.get("query_id", "")), body["query"], k)
                self._send(200, {"results": results})
            except (ValueError, TypeError, AttributeError) as exc:
                self._send(400, {"error": str(exc)})

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per query would drown the log

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    try:
        return Server(("127.0.0.1", port), Handler)
    except OSError as exc:
        raise ConfigError("--port", f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/search"


def _pid_file(url_file: Path) -> Path:
    return url_file.with_suffix(".pid")


def serve(overrides: Sequence[str], port: int, url_file: Path) -> int:
    """Build the ranker, listen, write the URL and pid files (the service answers from then
    on), and serve until Ctrl-C or SIGTERM; the files are removed on the way out."""
    ranker = Ranker(overrides)
    server = make_server(ranker, port)
    url = url_of(server)
    url_file.parent.mkdir(parents=True, exist_ok=True)
    _pid_file(url_file).write_text(f"{os.getpid()}\n", encoding="utf-8")
    url_file.write_text(url + "\n", encoding="utf-8")
    print(f"serving BM25 over {ranker.name} ({len(ranker.ids)} passages) at {url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (run.exits.stop_signals): a normal stop
        print("example service stopped", flush=True)
    finally:
        server.server_close()
        url_file.unlink(missing_ok=True)
        _pid_file(url_file).unlink(missing_ok=True)
    return EXIT_OK


def start_background(overrides: Sequence[str], port: int, url_file: Path) -> int:
    """Start `serve` as a process of its own (its output in `<url file>.log`) and return once
    it has written its URL: the service answers from then on."""
    if _running_pid(url_file) is not None:
        raise BenchError(
            f"an example service is already running ({url_file.read_text().strip()}, pid "
            f"{_running_pid(url_file)}); stop it first: python -m run.example_service --stop"
        )
    url_file.parent.mkdir(parents=True, exist_ok=True)
    url_file.unlink(missing_ok=True)
    log = url_file.with_suffix(".log")
    cmd = [sys.executable, "-m", "run.example_service", "--port", str(port)]
    cmd += ["--url-file", str(url_file), *overrides]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + START_WAIT_S
    while not url_file.is_file():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            said = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            raise BenchError(
                f"the example service did not start (see {log}): {said[-1] if said else '?'}"
            )
        time.sleep(0.1)
    url = url_file.read_text(encoding="utf-8").strip()
    print(
        f"example service (BM25) at {url}, pid {proc.pid}; its URL is in {url_file}, its log in "
        f"{log}; stop it with: python -m run.example_service --stop",
        flush=True,
    )
    return EXIT_OK


def _running_pid(url_file: Path) -> int | None:
    """The pid the pid file names, if that process is alive."""
    try:
        pid = int(_pid_file(url_file).read_text(encoding="utf-8").strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def stop(url_file: Path) -> int:
    """End the service `--background` started (SIGTERM, then wait for it)."""
    pid = _running_pid(url_file)
    if pid is None:
        url_file.unlink(missing_ok=True)
        _pid_file(url_file).unlink(missing_ok=True)
        raise BenchError(f"no example service is running ({_pid_file(url_file)} names none)")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while _running_pid(url_file) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running_pid(url_file) is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    url_file.unlink(missing_ok=True)
    _pid_file(url_file).unlink(missing_ok=True)
    print(f"example service (pid {pid}) stopped", flush=True)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m run.example_service",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("overrides", nargs="*", help="python -m run overrides, e.g. dataset=policy")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument(
        "--url-file",
        type=Path,
        default=DEFAULT_URL_FILE,
        help=f"where the URL is written (default {DEFAULT_URL_FILE}); its pid and log beside it",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="start, and return once it runs")
    mode.add_argument("--stop", action="store_true", help="stop the one --background started")
    args = parser.parse_args(argv)
    if not 0 <= args.port < 65536:
        raise ConfigError("--port", f"must be 0..65535, got {args.port}")
    if args.stop:
        return stop(args.url_file)
    if args.background:
        return start_background(args.overrides, args.port, args.url_file)
    return serve(args.overrides, args.port, args.url_file)


if __name__ == "__main__":
    sys.exit(main())
