"""The service arm against a local server that answers each query in a fixed time.

    .venv/bin/python benchmarks/bench_service.py           # 1,000 queries, 10 ms, concurrency 16
    .venv/bin/python benchmarks/bench_service.py --quick   # smoke run: 100 queries, 4 at once

The server runs in its own process (ThreadingHTTPServer, keep-alive, one thread per
connection), sleeps `--delay-ms` per request, then answers 10 corpus ids with descending scores.
The arm (`ServiceArm.search`, exactly as a job calls it) sends every query; the figure is its
wall time against the ideal `queries x delay / concurrency` (what the waiting alone costs when
`concurrency` requests are always in flight). Target (issue 10): at most 1.5x the ideal for
1,000 queries at 10 ms and concurrency 16. The RESULT line also says how many queries came back
ranked in full, which the smoke test checks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from retrieval_bench.config.service import ServiceConfig
from retrieval_bench.records import EvalQuery
from retrieval_bench.retrievers.service import ServiceArm
from retrieval_bench.tiebreak import TieBreak

PASSAGES = 10_000
RESULTS = 10


def passage_id(i: int) -> str:
    return f"p{i:05d}"


def serve(delay_s: float) -> None:
    """The server process: prints its port, then answers until killed."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as production servers do: no 40 ms delayed-ACK stall

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(delay_s)
            first = int(body["query_id"][1:]) * RESULTS % PASSAGES
            results = [
                {"id": passage_id((first + r) % PASSAGES), "score": float(RESULTS - r)}
                for r in range(min(RESULTS, body["top_k"]))
            ]
            data = json.dumps({"results": results}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_port, flush=True)
    server.serve_forever()


def measure(url: str, queries: int, concurrency: int) -> tuple[float, dict[str, Any], int]:
    """(wall seconds, the arm's info, queries ranked in full) for one pass over `queries`."""
    ids = [passage_id(i) for i in range(PASSAGES)]
    cfg = ServiceConfig(url=url, concurrency=concurrency, retries=0)
    cfg.validate()
    arm = ServiceArm("service", cfg, {pid: i for i, pid in enumerate(ids)}, TieBreak(ids))
    batch = [EvalQuery(f"q{i}", f"query {i}", "bench", "reviewed") for i in range(queries)]
    start = time.perf_counter()
    ranked = arm.search(batch, RESULTS, [None] * queries)
    wall = time.perf_counter() - start
    full = sum(
        r.returned == RESULTS and r.indices[0] == int(q.query_id[1:]) * RESULTS % PASSAGES
        for q, r in zip(batch, ranked, strict=True)
    )
    return wall, arm.info(), full


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=5, help="passes; best and median shown")
    parser.add_argument("--quick", action="store_true", help="100 queries, concurrency 4, 1 pass")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.delay_ms / 1000)
        return 0
    if args.quick:
        args.queries, args.concurrency, args.repeat = 100, 4, 1
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--delay-ms", str(args.delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{int(server.stdout.readline())}/search"
        passes = [measure(url, args.queries, args.concurrency) for _ in range(args.repeat)]
    finally:
        server.kill()
        server.wait()
    wall, info, full = min(passes, key=lambda p: p[0])
    median = statistics.median(p[0] for p in passes)
    ideal = args.queries * args.delay_ms / 1000 / args.concurrency
    latency = info["latency_ms"]
    print(f"passes (s): {', '.join(f'{p[0]:.3f}' for p in passes)}")
    print(
        f"RESULT service: {args.queries} queries, {args.delay_ms:g} ms each, concurrency "
        f"{args.concurrency}: wall {wall:.3f} s (best of {len(passes)}; median {median:.3f} s), "
        f"ideal {ideal:.3f} s, {wall / ideal:.2f}x the ideal (median {median / ideal:.2f}x; "
        f"target <= 1.5x); latency ms p50 {latency['p50']:.1f} p95 {latency['p95']:.1f} "
        f"max {latency['max']:.1f}; ranked in full {full}/{args.queries}, failed "
        f"{info['bad_input']['failed_queries']}, unknown ids {info['bad_input']['unknown_ids']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
