"""The `tracking:` node: tracking=none by default, tracking=mlflow's URI checked for its shape
(no MLflow import), each bad value refused naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config

from retrieval_bench.config.tracking import TrackingConfig, uri_problem
from retrieval_bench.errors import ConfigError


def test_tracking_is_off_by_default_and_mlflow_is_one_override() -> None:
    assert compose_config([]).tracking.kind == "none"
    cfg = compose_config(["tracking=mlflow", "tracking.uri=http://127.0.0.1:5000"])
    assert (cfg.tracking.kind, cfg.tracking.uri, cfg.tracking.experiment) == (
        "mlflow",
        "http://127.0.0.1:5000",
        "",
    )


@pytest.mark.parametrize(
    "uri",
    ["http://127.0.0.1:5000", "https://mlflow.example:443/x", "sqlite:///outputs/m.db",
     "sqlite:////tmp/m.db", "file:///tmp/mlruns", "outputs/mlruns", "postgresql://u@h/db"],
)  # fmt: skip
def test_tracking_uris_mlflow_opens_pass(uri: str) -> None:
    assert uri_problem(uri) == ""


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("", "is empty"),
        ("htp://127.0.0.1:5000", "unknown scheme 'htp'"),
        ("http://", "no server address"),
        ("http://host:port", "no server address"),
        ("sqlite://m.db", "sqlite:///RELATIVE/FILE"),
    ],
)
def test_malformed_tracking_uri_is_refused_naming_the_key(uri: str, said: str) -> None:
    with pytest.raises(ConfigError, match=r"tracking\.uri") as caught:
        compose_config(["tracking=mlflow", f"tracking.uri='{uri}'"])
    assert said in str(caught.value)


def test_other_tracking_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"tracking\.kind"):
        TrackingConfig(kind="wandb").validate()
    with pytest.raises(ConfigError, match=r"tracking\.timeout_s"):
        TrackingConfig(timeout_s=0).validate()
    with pytest.raises(ConfigError, match=r"tracking\.experiment"):
        TrackingConfig(kind="mlflow", experiment="x" * 501).validate()


def test_a_relative_local_store_is_an_output_of_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local store is written, so it resolves as outputs do (docs/output-paths.md): against
    the working directory only, never into the package's checkout when the folder it names is
    not there yet."""
    from retrieval_bench.tracking.store import resolved_uri

    monkeypatch.chdir(tmp_path)
    assert resolved_uri("sqlite:///mlruns.db") == f"sqlite:///{tmp_path / 'mlruns.db'}"
    assert resolved_uri("sqlite:///team/runs.db") == f"sqlite:///{tmp_path / 'team' / 'runs.db'}"
    assert resolved_uri("file:store") == (tmp_path / "store").as_uri()
    assert resolved_uri("plain") == (tmp_path / "plain").as_uri()
    assert (tmp_path / "team").is_dir() and (tmp_path / "plain").is_dir()
    assert resolved_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
