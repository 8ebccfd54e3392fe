"""A control for `bench_tracking.py --null-tracker`: MLflow's REST endpoints that the logger
calls, answered at once, with no work and nothing stored.

Every figure the tracking benchmark takes here has the MLflow server on the sweep's own two
cores, because this machine reaches no other host. A team's server runs elsewhere, and then its
work (0.6-0.7 CPU s a sweep here) is not beside the sweep. This stand-in takes that work off
these cores. The logger still does all of its own: importing MLflow, building each run's values,
encoding the requests, staging and sending every file, through MLflow's own client. The stand-in
only answers: a run is kept as its id, experiment and tags, so that the client's reads of a run
it just created make sense. Nothing logged to it can be read back, so the side that logs to it
is a control, never the measurement of the target: `bench_tracking.py` checks the real
server's runs only.

A request it does not know gets 404. The sweep then warns that it was not fully logged, and
the benchmark stops and says so, instead of timing a logger that gave up.

    python benchmarks/null_tracker.py PORT    # serves 127.0.0.1:PORT until killed
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

API = "/api/2.0/mlflow/"


class NullTracker(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.lock = threading.Lock()
        self.experiments: dict[str, str] = {}  # name -> id
        self.runs: dict[str, dict[str, Any]] = {}  # id -> experiment, name, status, tags

    def experiment(self, name: str) -> dict[str, Any]:
        with self.lock:
            eid = self.experiments.setdefault(name, str(len(self.experiments) + 1))
        return {
            "experiment_id": eid,
            "name": name,
            "artifact_location": f"mlflow-artifacts:/{eid}",
            "lifecycle_stage": "active",
        }

    def run(self, run_id: str) -> dict[str, Any]:
        run = self.runs[run_id]
        return {
            "info": {
                "run_id": run_id,
                "run_uuid": run_id,
                "run_name": run["name"],
                "experiment_id": run["experiment_id"],
                "status": run["status"],
                "start_time": 0,
                "artifact_uri": f"mlflow-artifacts:/{run['experiment_id']}/{run_id}/artifacts",
                "lifecycle_stage": "active",
            },
            "data": {"tags": [{"key": k, "value": v} for k, v in run["tags"].items()]},
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as MLflow's client's session expects
    # TCP_NODELAY, as uvicorn sets it: the body's write would otherwise wait for the client's
    # delayed ACK of the headers' (up to 40 ms a request).
    disable_nagle_algorithm = True
    server: NullTracker

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, body: dict[str, Any] | bytes, status: int = 200) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _unknown(self) -> None:
        self._reply({"error_code": "ENDPOINT_NOT_FOUND", "message": self.path}, 404)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/health":
            self._reply(b"OK")
        elif url.path == API + "experiments/get-by-name":
            self._reply({"experiment": self.server.experiment(query["experiment_name"])})
        elif url.path == API + "runs/get":
            self._reply({"run": self.server.run(query["run_id"])})
        else:
            self._unknown()

    def do_POST(self) -> None:
        path, request = urlparse(self.path).path, json.loads(self._body() or b"{}")
        tracker = self.server
        if path == API + "runs/create":
            run_id = uuid.uuid4().hex
            with tracker.lock:
                tracker.runs[run_id] = {
                    "experiment_id": request["experiment_id"],
                    "name": request.get("run_name", ""),
                    "status": "RUNNING",
                    "tags": {t["key"]: t["value"] for t in request.get("tags", [])},
                }
            self._reply({"run": tracker.run(run_id)})
        elif path == API + "runs/update":
            run_id = request.get("run_id") or request["run_uuid"]
            tracker.runs[run_id]["status"] = request.get("status", "RUNNING")
            self._reply({"run_info": tracker.run(run_id)["info"]})
        elif path in (API + "runs/log-batch", API + "runs/set-tag"):
            self._reply({})
        elif path == API + "runs/search":
            self._reply({"runs": []})
        elif path == API + "experiments/search":
            with tracker.lock:
                names = list(tracker.experiments)
            self._reply({"experiments": [tracker.experiment(n) for n in names]})
        elif path == API + "experiments/create":
            self._reply({"experiment_id": tracker.experiment(request["name"])["experiment_id"]})
        else:
            self._unknown()

    def do_PUT(self) -> None:  # a run's file (the artifacts proxy): read, dropped
        self._body()
        if self.path.startswith("/api/2.0/mlflow-artifacts/artifacts/"):
            self._reply({})
        else:
            self._unknown()


if __name__ == "__main__":
    NullTracker(int(sys.argv[1])).serve_forever()
