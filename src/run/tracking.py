"""tracking=mlflow in the app: the logger process a job or sweep hands its finished folders
to, and the Hydra callback that gives a sweep its parent run.

MLflow takes a second or more to import and each run takes requests to log, so none of it runs
in the job's process: `LiveLogger` starts `python -m run.track serve` (a fresh interpreter, on
another core), sends it each finished folder, and waits for it only at the end. The job folder
is complete before it is handed over; nothing of the logging is on the query path. A sweep's
logger creates the sweep's parent run first and says its id, which the callback puts in the
environment (`RETRIEVAL_BENCH_TRACKING_PARENT_RUN_ID`) for jobs that a launcher starts in other
processes or on other nodes; they log themselves as children through a logger of their own.

A tracker that is down or slow never fails a job: the logger says what it could not log and
`warning()` gives the one line, with the `run.track sync` command that logs it later. A setting
the tracker refuses (a deleted experiment) is a ConfigError naming the key (exit 2).
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.tracking.names import PARENT_ENV
from retrieval_bench.tracking.store import TrackerRefused, quiet_environment, sync_command

# How long the end of a job or sweep waits for its logger, in units of tracking.timeout_s
# (a request, its two retries and the back-off between them).
_PATIENCE = 4


class LiveLogger:
    """One `python -m run.track serve` process and what it said."""

    # The sweep logger of this process (the basic launcher runs jobs in the sweep's process).
    current: LiveLogger | None = None

    def __init__(
        self,
        cfg: TrackingConfig,
        sweep_dir: Path | None = None,
        dataset: str = "",
        parent_id: str | None = None,
        new_folder: bool = False,
    ) -> None:
        self.cfg = cfg
        self.sweep_dir = sweep_dir
        self.pid = os.getpid()
        self.parent_id = parent_id
        self.handed: list[Path] = []
        self.failed: list[str] = []
        self.down: str | None = None
        self.refused: str | None = None
        self._parent_known = threading.Event()
        # The logger's last line (`exit <status>`), or the end of its output.
        self._ended = threading.Event()
        self.status: int | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        cmd = [
            sys.executable, "-m", "run.track", "serve",
            "--uri", cfg.uri, "--experiment", cfg.experiment, "--timeout", str(cfg.timeout_s),
        ]  # fmt: skip
        if sweep_dir is not None:
            cmd += ["--sweep", str(sweep_dir), "--dataset", dataset]
            cmd += ["--new-folder"] if new_folder else []
        if parent_id:
            cmd += ["--parent-run-id", parent_id]
        env = {**os.environ, **quiet_environment(cfg.timeout_s)}
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
            start_new_session=False,
        )
        self._readers = [
            threading.Thread(target=self._read_replies, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        if sweep_dir is None:
            self._parent_known.set()

    def _read_replies(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, _, rest = line.rstrip("\n").partition(" ")
            if word == "parent":
                self.parent_id = rest
                os.environ[PARENT_ENV] = rest
            elif word == "down" and self.down is None:
                self.down = rest
            elif word == "refused":
                self.refused = rest
            elif word == "failed":
                self.failed.append(rest)
            elif word == "exit" and rest.lstrip("-").isdigit():
                self.status = int(rest)
                self._ended.set()
            if word in ("parent", "down", "refused"):
                self._parent_known.set()
        self._parent_known.set()
        self._ended.set()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def wait_parent(self) -> None:
        """Until the logger has created the sweep's parent run (or could not): launchers that
        start jobs elsewhere need its id in the environment before they start them."""
        self._parent_known.wait(timeout=_PATIENCE * self.cfg.timeout_s)
        self._raise_refused()

    def hand_over(self, job_dir: Path) -> None:
        """Log this finished folder (a job: as a child of the sweep's run, if any)."""
        self._raise_refused()
        self.handed.append(job_dir)
        self._send(f"log {Path(job_dir).resolve()}\n")

    def _send(self, text: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(text)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the logger is gone: finish() says so

    def _raise_refused(self) -> None:
        if self.refused is not None:
            raise TrackerRefused(
                "tracking.experiment", self.refused.partition(": ")[2] or self.refused
            )

    def abandon(self) -> None:
        """End a logger that was handed nothing (the work it was started for failed)."""
        self.proc.kill()
        self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)

    def finish(self) -> str | None:
        """Tell the logger to end (a sweep's: log the comparison and anything left), wait for it,
        and return the warning line when something was not logged (None: all logged)."""
        self._send("end\n")
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        patience = _PATIENCE * self.cfg.timeout_s * max(1, len(self.handed))
        code: int | None = None
        if not self._ended.wait(timeout=patience):
            self.proc.kill()
            self.down = self.down or f"no answer within {patience} s"
        elif self.status == 0:
            # All logged and said: the process is ending (os._exit); its teardown, a few
            # hundred MB unmapped, is not this sweep's to wait for (it is reaped beside).
            code = 0
            threading.Thread(target=self.proc.wait, daemon=True).start()
        if code is None:  # something was not logged: its exit status and last words
            try:
                code = self.proc.wait(timeout=patience)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for reader in self._readers:
                reader.join(timeout=5)
        if LiveLogger.current is self:
            LiveLogger.current = None
        if self.sweep_dir is not None and os.environ.get(PARENT_ENV) == self.parent_id:
            os.environ.pop(PARENT_ENV, None)
        self._raise_refused()
        if code == 0:
            return None
        why = self.down or (self._stderr[-1] if self._stderr else f"logger exit {code}")
        folders = [self.sweep_dir] if self.sweep_dir is not None else self.handed
        what = "the sweep" if self.sweep_dir is not None else "the job"
        return (
            f"warning: {what} was not (fully) logged to {self.cfg.uri}: {why}; its folders are "
            f"complete; log them later with: {sync_command(*folders)}"
        )


def _sweep_logger() -> LiveLogger | None:
    """This process's sweep logger (the basic launcher runs a sweep's jobs in its process)."""
    sweep = LiveLogger.current
    return sweep if sweep is not None and sweep.pid == os.getpid() else None


@contextlib.contextmanager
def own_logger(cfg: TrackingConfig) -> Iterator[LiveLogger | None]:
    """The logger of a folder this process is about to make (a single job, a job a launcher
    started elsewhere, a tuning), started now, so that its interpreter and MLflow load while
    the work runs instead of after it (seconds of CPU a job would wait for); it waits on its
    input meanwhile. None when tracking is off or this process's sweep logger takes the folder.
    Ended unheard when the work fails: it has logged nothing."""
    logger = None
    if cfg.enabled and _sweep_logger() is None:
        logger = LiveLogger(cfg, parent_id=os.environ.get(PARENT_ENV) or None)
    try:
        yield logger
    except BaseException:
        if logger is not None:
            logger.abandon()
        raise


def log_finished(
    job_dir: Path, cfg: TrackingConfig, logger: LiveLogger | None = None
) -> str | None:
    """After a job's folder is complete: hand it to this process's sweep logger (the basic
    launcher), or log it through a logger of its own (`logger`, started by `own_logger`; else
    one started now: a single run, or a job a launcher started elsewhere, a child of the run
    named by the environment). Returns the warning line for a job it could not log here and
    now (None: logged, or handed over)."""
    sweep = _sweep_logger()
    if sweep is not None:
        sweep.hand_over(job_dir)
        return None
    logger = logger or LiveLogger(cfg, parent_id=os.environ.get(PARENT_ENV) or None)
    logger.hand_over(job_dir)
    return logger.finish()


# Launchers that run every job in the sweep's own process.
_IN_PROCESS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",)


class TrackingCallback(Callback):
    """Holds nothing itself: launchers pickle their callbacks into the jobs' processes, and the
    sweep's logger (a process and its reader threads) lives in `LiveLogger.current`."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        node = config.get("tracking")
        if node is None or node.get("kind", "none") == "none":
            return
        from retrieval_bench.config.tracking import TrackingConfig
        from retrieval_bench.errors import EXIT_BAD_INPUT, ConfigError
        from retrieval_bench.tracking.store import check_reachable

        cfg = OmegaConf.to_object(node)
        assert isinstance(cfg, TrackingConfig)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            cfg.validate()
            check_reachable(cfg)
            # A folder that holds nothing yet holds no job logged before (what its logger then
            # need not search for).
            new_folder = not sweep_dir.is_dir() or not any(sweep_dir.iterdir())
            sweep_dir.mkdir(parents=True, exist_ok=True)
            logger = LiveLogger(
                cfg, sweep_dir=sweep_dir, dataset=_dataset_name(config), new_folder=new_folder
            )
            LiveLogger.current = logger
            if str(config.hydra.launcher.get("_target_", "")) not in _IN_PROCESS:
                logger.wait_parent()
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_BAD_INPUT) from exc

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        logger = LiveLogger.current
        if logger is None:
            return
        from retrieval_bench.errors import EXIT_BAD_INPUT, ConfigError

        start = time.perf_counter()
        try:
            warning = logger.finish()
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_BAD_INPUT) from exc
        if warning:
            print(warning, file=sys.stderr, flush=True)
        else:  # what of the logging the sweep waited for: the rest ran beside its jobs
            waited = time.perf_counter() - start
            said = f"tracking: sweep logged to {logger.cfg.uri} ({waited:.2f} s after its end)"
            print(said, flush=True)


def _dataset_name(config: DictConfig) -> str:
    """The dataset the sweep's experiment is named after (`tracking.experiment` empty): its
    name, or a BEIR folder's name."""
    dataset = config.get("dataset") or {}
    return str(dataset.get("name") or Path(str(dataset.get("path") or "dataset")).name)
