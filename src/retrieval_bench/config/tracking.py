"""The `tracking:` config node: where finished jobs, sweeps, tunings and months are logged.

`tracking=none` (the default) logs nothing and imports nothing; `tracking=mlflow` logs each
finished folder to an MLflow tracking store (`retrieval_bench.tracking`). Only the URI's shape
is checked here (no MLflow import): whether a server answers is checked when a job starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from retrieval_bench.errors import ConfigError

KINDS = ("none", "mlflow")
# URI schemes MLflow's client opens as a tracking store. A plain path is a file store.
SCHEMES = ("file", "sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass
class TrackingConfig:
    kind: str = field(default="none", metadata={"choices": KINDS})
    """none: nothing is logged; mlflow: each finished job, sweep, tuning and month is."""
    uri: str = "sqlite:///mlruns.db"
    """An MLflow tracking URI: a server (http://127.0.0.1:5000), a database
    (sqlite:///mlruns.db, the default: artifacts in mlartifacts/ beside it; never under outputs/,
    whose job folders other commands search) or a file store folder. A relative sqlite or file
    path resolves against the working directory, as MLflow's own and every output's do."""
    experiment: str = ""
    """The MLflow experiment; empty: the dataset's name."""
    timeout_s: int = 30
    """Seconds one request to a tracking server may take before the logging gives up (the job
    folder stands; `python -m run.track sync` logs it later)."""

    @property
    def enabled(self) -> bool:
        return self.kind != "none"

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(
                "tracking.kind", f"unknown tracker {self.kind!r}; choose one of {', '.join(KINDS)}"
            )
        if self.timeout_s < 1:
            raise ConfigError("tracking.timeout_s", f"must be >= 1, got {self.timeout_s}")
        if not self.enabled:
            return
        problem = uri_problem(self.uri)
        if problem:
            raise ConfigError("tracking.uri", problem)
        if len(self.experiment) > 500 or "\0" in self.experiment:
            raise ConfigError(
                "tracking.experiment", "MLflow refuses it: at most 500 characters, no NUL"
            )


def uri_problem(uri: str) -> str:
    """Why `uri` is no MLflow tracking URI ('' when it is one)."""
    if not uri.strip():
        return "is empty; give an MLflow tracking URI (http://HOST:PORT, sqlite:///FILE, a folder)"
    found = _SCHEME.match(uri)
    if found is None or len(found[1]) == 1:  # no scheme, or a Windows drive letter: a folder
        return ""
    scheme = found[1].lower().partition("+")[0]
    if scheme not in SCHEMES:
        return f"{uri!r}: unknown scheme {found[1]!r} (MLflow opens {', '.join(SCHEMES)})"
    rest = uri[found.end() :]
    if scheme in ("http", "https") and not re.match(r"^//[^/\s:]+(:\d+)?(/\S*)?$", rest):
        return f"{uri!r} is no server address (expected {scheme}://HOST[:PORT])"
    if scheme == "sqlite" and not rest.startswith("///"):
        return f"{uri!r}: a sqlite URI is sqlite:///RELATIVE/FILE or sqlite:////ABSOLUTE/FILE"
    return ""
