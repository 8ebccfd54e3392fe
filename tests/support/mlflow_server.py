"""A real `mlflow server` on 127.0.0.1 for the tracking tests: a SQLite backend store and a local
artifact root in a temporary folder, a free port, started and waited for (its /health answers),
stopped (and restarted on the same store and port: the tracker-down tests), torn down at the
end. Nothing is mocked: the product talks to it through MLflow's own client.

Also `KillServer`, a Hydra callback a test adds to a sweep to stop the server after the sweep's
first job: the tracker goes down mid-sweep, deterministically."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

# A tracking server, as docs/how-to/tracking.md starts one: no telemetry, and no job runner
# (MLflow 3 starts one for its GenAI features, which nothing here uses: seven more processes
# that import MLflow, 16-18 CPU s more than the server alone, 12-13 of them after it answers:
# benchmarks/bench_tracking.py --server-start).
SERVER_ENVIRONMENT = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MlflowServer:
    def __init__(self, folder: Path, job_runner: bool = False) -> None:
        """`job_runner`: start MLflow's job runner too, as a plain `mlflow server` does
        (benchmarks/bench_tracking.py --server-start measures what it costs)."""
        self.folder = folder
        self.job_runner = job_runner
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pid_file = folder / "server.pid"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_s: float = 120.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = (self.folder / "server.log").open("ab")
        env = {**os.environ, **SERVER_ENVIRONMENT}
        if self.job_runner:
            env.pop("MLFLOW_SERVER_ENABLE_JOB_EXECUTION")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.pid_file.write_text(str(self.proc.pid))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited {self.proc.returncode}: {self.log()}")
            if self.answers():
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"mlflow server did not answer in {wait_s} s: {self.log()}")

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "mlflow", "server",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
            "--artifacts-destination", str(self.folder / "artifacts"),
            "--workers", "1",
        ]  # fmt: skip

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server and every process it started (its workers): the tracker is gone."""
        if self.proc is None:
            return
        stop_group(self.proc.pid)
        self.proc.wait(timeout=30)
        self.proc = None

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def stop_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


class KillServer(Callback):
    """`+hydra.callbacks.kill._target_=support.mlflow_server.KillServer
    +hydra.callbacks.kill.pid_file=...`: after the sweep's first job, the server (whose process
    group leader's pid the file holds) is killed."""

    def __init__(self, pid_file: str) -> None:
        self.pid_file = Path(pid_file)
        self.done = False

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        if not self.done:
            self.done = True
            stop_group(int(self.pid_file.read_text()))
