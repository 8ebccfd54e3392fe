"""The one module that imports MLflow: its `MlflowClient`, never its REST protocol by hand.

`TrackingStore.open` connects to a tracking URI (a relative sqlite or file path resolves
against the working directory; a local store keeps its artifacts beside it); `log` finds a run
by its key (`rb.key`) or creates it, logs what is missing or changed, and marks it complete
last, so a run interrupted half-way is completed by the next `log` of the same folder and never
doubled.

A run costs few round trips to a server, since a sweep waits for its last job's run and every
request waits its turn on a loaded machine: the run is created with its identifying tags, its
values go in one `log_batch` while its files upload beside it (`_UPLOADS` at a time), and the
digest and the completion mark go together in one last `log_batch`, beside the run's end.

Failures are of two kinds: the tracker refused something it will always refuse (a deleted
experiment, an invalid name: `TrackerRefused`, a ConfigError naming the key, exit 2), or it did
not answer (`TrackerDown`: a warning, the folders stay on disk for `run.track sync`).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.paths import resolve_output
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.content import Artifact, RunContent

if TYPE_CHECKING:
    from mlflow.store.artifact.artifact_repo import ArtifactRepository

# Requests to a tracking server: few retries, a short back-off (MLflow's defaults retry for
# minutes, which would hold a sweep's end for that long when the server is gone).
_HTTP_RETRIES = "2"
_HTTP_BACKOFF = "1"
# Requests in flight at once while a run's values and files go to a server: each request mostly
# waits (for the server, for a turn on the CPU), so a run's dozen files cost a few waits, not a
# dozen. A local store (sqlite, a folder) is written in this process: one at a time.
_UPLOADS = 4
# MLflow's error codes that mean "this request will never succeed" (anything else: down/slow).
_REFUSED = (
    "INVALID_PARAMETER_VALUE",
    "RESOURCE_ALREADY_EXISTS",
    "RESOURCE_DOES_NOT_EXIST",
    "BAD_REQUEST",
    "INVALID_STATE",
    "PERMISSION_DENIED",
)


class TrackerDown(BenchError):
    """The tracker did not answer (or not in time): nothing is lost, `run.track sync` logs the
    folders later."""


class TrackerRefused(ConfigError):
    """The tracker refuses a setting (an experiment name, a deleted experiment): exit 2."""


def quiet_environment(timeout_s: int) -> dict[str, str]:
    """The environment MLflow reads: no usage telemetry (no network but the tracker), and
    requests that give up after `timeout_s` and two retries."""
    return {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        # Our own lines say where each run went; MLflow's "View run ... at" would be noise.
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(timeout_s),
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": _HTTP_RETRIES,
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": _HTTP_BACKOFF,
    }


def resolved_uri(uri: str) -> str:
    """A local store's path made absolute, its folder created; a server's URI as it is. The
    store is written, so a relative path is an output's (`paths.resolve_output`): against the
    working directory, as MLflow itself reads it, never the package's checkout."""
    if uri.startswith("sqlite:///"):
        path = resolve_output(uri.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"
    if uri.startswith("file:"):
        path = resolve_output(uri.removeprefix("file://").removeprefix("file:"))
        path.mkdir(parents=True, exist_ok=True)
        return path.as_uri()
    if ":" not in uri.split("/")[0]:  # a plain folder: MLflow's file store
        path = resolve_output(uri)
        path.mkdir(parents=True, exist_ok=True)
        return path.as_uri()
    return uri


def local_artifact_root(uri: str) -> str | None:
    """Where a local sqlite store keeps artifacts (`mlartifacts/` beside the database, as
    `mlflow server` names it); None for a server (it decides) or a file store (its own folder)."""
    if uri.startswith("sqlite:///"):
        return (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts").as_uri()
    return None


def is_down(exc: BaseException) -> bool:
    """Whether an MLflow failure means the tracker did not answer (vs refused)."""
    code = getattr(exc, "error_code", None)
    return code not in _REFUSED


@dataclass
class LoggedRun:
    run_id: str
    experiment_id: str
    created: bool
    skipped: bool  # already complete with the same content: nothing was sent
    # The MLflow run as `find_or_create` left it, for `log_onto` (no second search).
    run: Any = field(default=None, repr=False, compare=False)


class TrackingStore:
    """An open tracking store (one MlflowClient)."""

    def __init__(self, uri: str, timeout_s: int = 30) -> None:
        os.environ.update(quiet_environment(timeout_s))
        from mlflow.tracking import MlflowClient

        self.uri = resolved_uri(uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        # A server: requests go side by side (`_UPLOADS`); a local store: one at a time.
        self.remote = self.uri.startswith(("http://", "https://"))
        self._experiments: dict[str, str] = {}
        self._all_ids: list[str] | None = None
        self._run_experiment: dict[str, str] = {}

    @classmethod
    def open(cls, cfg: TrackingConfig) -> TrackingStore:
        return cls(cfg.uri, cfg.timeout_s)

    # -- experiments -------------------------------------------------------------------------
    def experiment_id(self, name: str) -> str:
        """The experiment's id, created when missing; a deleted one is refused (MLflow keeps its
        name taken until it is restored or purged)."""
        if name in self._experiments:
            return self._experiments[name]
        with self._calls(f"experiment {name!r}", key="tracking.experiment"):
            found = self.client.get_experiment_by_name(name)
            if found is None:
                exp_id = self.client.create_experiment(
                    name, artifact_location=_artifact_location(self.uri, name)
                )
            elif found.lifecycle_stage == "deleted":
                raise TrackerRefused(
                    "tracking.experiment",
                    f"experiment {name!r} is deleted in {self.uri}: restore it "
                    "(mlflow experiments restore) or choose another name",
                )
            else:
                exp_id = found.experiment_id
        self._experiments[name] = exp_id
        return exp_id

    # -- runs --------------------------------------------------------------------------------
    def experiment_ids(self) -> list[str]:
        """Every active experiment's id (listed once per store, plus those it created)."""
        if self._all_ids is None:
            with self._calls("listing experiments"):
                found = self.client.search_experiments(max_results=50000)
            self._all_ids = [e.experiment_id for e in found]
        return self._all_ids + [i for i in self._experiments.values() if i not in self._all_ids]

    def find(self, key: str) -> Any | None:
        """The run logged for a folder key in any experiment (the oldest, should two ever
        exist), or None: a folder has one run wherever it was first logged."""
        with self._calls("searching runs"):
            runs = self.client.search_runs(
                self.experiment_ids(),
                filter_string=f"tags.`{tn.KEY}` = '{key_hash(key)}'",
                order_by=["attributes.start_time ASC"],
                max_results=5,
            )
        return runs[0] if runs else None

    def runs(self, experiment_id: str, filter_string: str = "") -> list[Any]:
        """Every run of the experiment matching `filter_string`, oldest first."""
        out: list[Any] = []
        token = None
        with self._calls("searching runs"):
            while True:
                page = self.client.search_runs(
                    [experiment_id],
                    filter_string=filter_string,
                    order_by=["attributes.start_time ASC"],
                    max_results=1000,
                    page_token=token,
                )
                out.extend(page)
                token = page.token
                if not token:
                    return out

    def find_or_create(self, content: RunContent, experiment_id: str) -> LoggedRun:
        """The folder's run, created (incomplete, running) when there is none, nothing logged on
        it: a sweep's parent as the sweep starts, which `log` fills and completes when it ends."""
        run = self.find(content.key)
        created = run is None
        if run is None:
            with self._calls(f"logging {content.key}"):
                run = self._create(content, experiment_id, parent_id=None)
        info = run.info
        self._run_experiment[info.run_id] = str(info.experiment_id)  # its jobs go there too
        return LoggedRun(info.run_id, info.experiment_id, created, skipped=not created, run=run)

    def log(
        self, content: RunContent, experiment_id: str, parent_id: str | None = None
    ) -> LoggedRun:
        """Find the folder's run by its key or create it, then log what it lacks; `rb.complete`
        last. A run already complete with the same content is left as it is."""
        return self.log_onto(content, self.find(content.key), experiment_id, parent_id)

    def log_children(
        self, contents: Sequence[RunContent], parent: LoggedRun
    ) -> dict[str, LoggedRun]:
        """Many small runs under one parent (a tuning's trials), by key: found again among the
        parent's children in one search (not one search each), and logged side by side to a
        server, in the parent's experiment."""
        children = self.runs(parent.experiment_id, f"tags.`{tn.PARENT_RUN_ID}` = '{parent.run_id}'")
        found = {run.data.tags.get(tn.KEY): run for run in reversed(children)}  # oldest wins
        with ThreadPoolExecutor(_UPLOADS if self.remote else 1, "rb-track") as pool:
            logged = {
                c.key: pool.submit(
                    self.log_onto,
                    c,
                    found.get(key_hash(c.key)),
                    parent.experiment_id,
                    parent.run_id,
                )
                for c in contents
            }
            try:
                return {key: each.result() for key, each in logged.items()}
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise

    def log_onto(
        self, content: RunContent, run: Any | None, experiment_id: str, parent_id: str | None
    ) -> LoggedRun:
        """`log` where the caller knows the folder's run already: `run` as it last saw it (found
        among a parent's children by `log_children`'s one search, or `LoggedRun.run`: a sweep's
        parent, opened by this process as the sweep started), or None when the folder has none
        (not found, or a job of a sweep folder that was new when this process created the
        sweep's run)."""
        from mlflow.entities import RunTag

        digest = content_digest(content)
        created = run is None
        with self._calls(f"logging {content.key}"):
            if run is None:
                run = self._create(content, experiment_id, parent_id)
            run_id = run.info.run_id
            have = run.data
            complete = have.tags.get(tn.COMPLETE) == "true"
            finished = run.info.status == "FINISHED"
            if complete and have.tags.get(tn.DIGEST) == digest:
                if parent_id and have.tags.get(tn.PARENT_RUN_ID) != parent_id:
                    self.client.set_tag(run_id, tn.PARENT_RUN_ID, parent_id)
                if not finished:  # its completion mark went in, its end did not
                    self.client.set_terminated(run_id, "FINISHED")
                return LoggedRun(run_id, run.info.experiment_id, created, skipped=True)
            if complete:  # its folder changed since: say so before logging the change
                self.client.set_tag(run_id, tn.COMPLETE, "false")
            metrics, params, tags = _values(content, have, parent_id)
            last = [RunTag(tn.DIGEST, digest), RunTag(tn.COMPLETE, "true")]
            ends: list[Callable[[], Any]]
            if not content.artifacts and _one_request(metrics, params, [*tags, *last]):
                # MLflow's stores write a batch's tags after its params and metrics.
                ends = [partial(self.client.log_batch, run_id, metrics, params, [*tags, *last])]
            else:
                self._send(run, content.artifacts, (metrics, params, tags))
                ends = [partial(self.client.log_batch, run_id, tags=last)]
            if not finished:
                ends.append(partial(self.client.set_terminated, run_id, "FINISHED"))
            self._side_by_side(ends)
        return LoggedRun(run_id, run.info.experiment_id, created, skipped=False)

    def _side_by_side(self, calls: Sequence[Callable[[], Any]]) -> None:
        """Independent requests, side by side to a server (one wait, not one each), in order
        to a local store. The completion mark and the run's end are such: each is checked on
        its own by the next `log` (a run complete but not ended is ended then)."""
        if not self.remote or len(calls) < 2:
            for call in calls:
                call()
            return
        with ThreadPoolExecutor(len(calls), "rb-track") as pool:
            for each in [pool.submit(call) for call in calls]:
                each.result()

    def _create(self, content: RunContent, experiment_id: str, parent_id: str | None) -> Any:
        tags = {
            tn.KEY: key_hash(content.key),
            tn.FOLDER: content.key,
            tn.KIND: content.kind,
            tn.COMPLETE: "false",
        }
        if parent_id:
            tags[tn.PARENT_RUN_ID] = parent_id
        return self.client.create_run(experiment_id, tags=tags, run_name=content.name)

    def _send(self, run: Any, artifacts: Sequence[Artifact], values: _Values) -> None:
        """The run's values and its files, side by side to a server (`_UPLOADS` requests in
        flight), into the artifact store the run already names (`info.artifact_uri`: MLflow's
        `log_artifact` would ask the tracker for the run again first). The first failure is
        raised once the requests in flight have ended."""
        run_id = run.info.run_id
        repository = artifact_repository(run.info.artifact_uri, self.uri)
        with (
            tempfile.TemporaryDirectory(prefix="rb-track-") as tmp,
            ThreadPoolExecutor(_UPLOADS if self.remote else 1, "rb-track") as pool,
        ):
            files = [_staged(artifact, Path(tmp)) for artifact in artifacts]
            sent: list[Future[Any]] = [pool.submit(self.client.log_batch, run_id, *values)]
            sent += [pool.submit(repository.log_artifact, *f) for f in files]
            try:
                for each in sent:
                    each.result()
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise

    def experiment_of(self, run_id: str) -> str:
        """The experiment a run is in (a child goes where its parent is)."""
        if run_id not in self._run_experiment:
            with self._calls(f"run {run_id}", key=tn.PARENT_ENV):
                found = self.client.get_run(run_id).info.experiment_id
            self._run_experiment[run_id] = str(found)
        return self._run_experiment[run_id]

    def download(self, run_id: str, path: str, dst: Path) -> Path:
        with self._calls(f"downloading {path} of run {run_id}"):
            dst.mkdir(parents=True, exist_ok=True)
            return Path(self.client.download_artifacts(run_id, path, str(dst)))

    def _calls(self, what: str, key: str = "tracking.uri") -> _Calls:
        return _Calls(self.uri, what, key)


class _Calls:
    """MLflow's exceptions as this project's: TrackerDown (it did not answer) or TrackerRefused
    (it refused; exit 2 naming the key). Never swallows one."""

    def __init__(self, uri: str, what: str, key: str) -> None:
        self.uri, self.what, self.key = uri, what, key

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, BenchError) or not isinstance(exc, Exception):
            return
        message = " ".join(str(exc).split())
        if is_down(exc):
            raise TrackerDown(f"{self.uri} did not answer ({self.what}: {_why(message)})") from exc
        raise TrackerRefused(self.key, f"{self.uri} refused ({self.what}): {message}") from exc


def _why(message: str) -> str:
    """A failed request's reason in a few words (MLflow's message repeats the URL, the retry
    policy and the socket's repr)."""
    for marker, said in (
        ("NewConnectionError", "connection refused"),
        ("ConnectTimeout", "connection timed out"),
        ("ReadTimeout", "no answer in time"),
        ("RemoteDisconnected", "the server closed the connection"),
        ("database is locked", "its database is locked"),
    ):
        if marker in message:
            return said
    return message[:160]


_Values = tuple[list[Any], list[Any], list[Any]]  # MLflow's metrics, params and tags


def _values(content: RunContent, have: Any, parent_id: str | None) -> _Values:
    """What of `content` the run (`have`: its data) lacks, as MLflow's metrics, params and tags
    (the content's own tags always: a tag is replaced, never added twice)."""
    from mlflow.entities import Metric, Param, RunTag

    params = [Param(k, v) for k, v in content.params.items() if have.params.get(k) is None]
    changed = sorted(k for k, v in content.params.items() if have.params.get(k) not in (None, v))
    tags = dict(content.tags)
    tags[tn.KIND] = content.kind
    if parent_id:
        tags[tn.PARENT_RUN_ID] = parent_id
    if changed:  # MLflow never changes a param: say so where a person looks
        tags["rb.params_changed"] = ", ".join(changed)[:8000]
    metrics = [
        Metric(k, v, content.timestamp_ms, 0)
        for k, v in content.metrics.items()
        if have.metrics.get(k) != v
    ]
    return metrics, params, [RunTag(k, v) for k, v in tags.items()]


def _one_request(metrics: Sequence[Any], params: Sequence[Any], tags: Sequence[Any]) -> bool:
    """Whether MLflow's client sends this batch as one request (it splits a larger one, and
    then a tag may arrive before the last metrics)."""
    from mlflow.utils.validation import (
        MAX_ENTITIES_PER_BATCH,
        MAX_METRICS_PER_BATCH,
        MAX_PARAMS_TAGS_PER_BATCH,
    )

    return (
        len(params) <= MAX_PARAMS_TAGS_PER_BATCH
        and len(tags) <= MAX_PARAMS_TAGS_PER_BATCH
        and len(metrics) <= MAX_METRICS_PER_BATCH
        and len(metrics) + len(params) + len(tags) <= MAX_ENTITIES_PER_BATCH
    )


def artifact_repository(artifact_uri: str, tracking_uri: str) -> ArtifactRepository:
    """The run's artifact store as MLflow's client opens it for `log_artifact`, from the
    artifact URI the run already names (no request): a Databricks profile in the tracking URI
    goes into a `dbfs:` artifact URI, as the client does."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.utils.uri import add_databricks_profile_info_to_artifact_uri

    located = add_databricks_profile_info_to_artifact_uri(artifact_uri, tracking_uri)
    return get_artifact_repository(located, tracking_uri=tracking_uri)


def _staged(artifact: Artifact, tmp: Path) -> tuple[str, str | None]:
    """A file as MLflow's `log_artifact` takes it (its local path, the run's folder it goes
    into): compressed into `tmp` when it is uploaded gzipped, copied there when renamed."""
    source = artifact.source
    if artifact.gzip:
        source = tmp / (artifact.name or source.name + ".gz")
        with artifact.source.open("rb") as src, gzip.open(source, "wb", 6) as dst:
            shutil.copyfileobj(src, dst)
    elif artifact.name and artifact.name != source.name:
        source = tmp / artifact.name
        shutil.copyfile(artifact.source, source)
    return str(source), artifact.into or None


def key_hash(key: str) -> str:
    """What `rb.key` holds: the key's sha256 (a path may hold quotes a filter cannot)."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def content_digest(content: RunContent) -> str:
    """A digest of everything a run logs, files by size and mtime: a folder logged again
    unchanged is recognised without sending anything."""
    digest = hashlib.sha256()
    for mapping in (content.params, content.tags, content.metrics):
        for key, value in sorted(mapping.items()):
            digest.update(f"{key}\0{value}\0".encode())
    for artifact in content.artifacts:
        st = artifact.source.stat()
        digest.update(f"{artifact.logged_as}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:32]


def _artifact_location(uri: str, experiment: str) -> str | None:
    root = local_artifact_root(uri)
    if root is None:
        return None
    safe = hashlib.sha256(experiment.encode()).hexdigest()[:16]
    return f"{root}/{safe}"


def check_reachable(cfg: TrackingConfig) -> None:
    """Before any work: a server URI must answer MLflow's health check, a local store's folder
    must be creatable (ConfigError naming tracking.uri otherwise, exit 2)."""
    uri = cfg.uri
    if uri.startswith(("http://", "https://")):
        url = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=min(cfg.timeout_s, 10)) as reply:
                if reply.status != 200:
                    raise ConfigError("tracking.uri", f"{url} answered HTTP {reply.status}")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(
                "tracking.uri", f"no MLflow server answers at {uri} ({reason})"
            ) from None
        return
    try:
        resolved_uri(uri)
    except OSError as exc:
        raise ConfigError("tracking.uri", f"{uri}: cannot create its folder ({exc})") from None


def sync_command(*folders: Path) -> str:
    return "python -m run.track sync " + " ".join(str(f) for f in folders)
