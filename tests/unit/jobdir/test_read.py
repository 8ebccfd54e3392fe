"""Reading job folders: a scan names every folder it skips and why (unfinished, with the
reason its marker gives, or missing a file), and a comparison with no finished job says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.jobdir.files import JobFolderError
from retrieval_bench.jobdir.names import UNFINISHED as UNFINISHED_MARKER
from retrieval_bench.jobdir.read import scan_jobs


def _job_folder(path: Path, *files: str, marker: str | None = None) -> Path:
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_text("{}" if name.endswith(".json") else "")
    if marker is not None:
        (path / UNFINISHED_MARKER).write_text(marker + "\n")
    return path


def test_scan_names_every_skipped_folder_and_why(tmp_path: Path) -> None:
    interrupted = _job_folder(tmp_path / "0-a", marker="interrupted (2026-11-30T10:00:00, pid 7)")
    failed = _job_folder(tmp_path / "1-b", "metrics.json", marker="failed: config key 'top_k'")
    half = _job_folder(tmp_path / "2-c", "metrics.json", "manifest.json")
    scan = scan_jobs([tmp_path])
    assert scan.jobs == []
    assert scan.skipped_lines() == [
        f"skipped {interrupted}: unfinished: interrupted (2026-11-30T10:00:00, pid 7)",
        f"skipped {failed}: unfinished: failed: config key 'top_k'",
        f"skipped {half}: unfinished: no report.md",
    ]
    with pytest.raises(JobFolderError) as info:
        compare_dirs([tmp_path], CompareConfig())
    assert str(info.value) == "no finished job to compare; " + "; ".join(scan.skipped_lines())


def test_yaml_is_read_as_pythons_safe_loader_reads_it(tmp_path: Path) -> None:
    """`read_yaml` parses with libyaml where the wheel has it: every YAML file the project ships
    and a job's Hydra records (OmegaConf's own dump, with its quoting and interpolations) read
    exactly as PyYAML's pure-Python safe loader reads them."""
    import yaml
    from omegaconf import OmegaConf

    from retrieval_bench.config import RunConfig
    from retrieval_bench.jobdir.files import read_yaml

    root = Path(__file__).resolve().parents[3]
    hydra_record = tmp_path / "config.yaml"
    hydra_record.write_text(OmegaConf.to_yaml(OmegaConf.structured(RunConfig())), "utf-8")
    files = [*sorted((root / "conf").rglob("*.yaml")), hydra_record]
    assert len(files) > 20
    for path in files:
        assert read_yaml(path) == yaml.safe_load(path.read_text("utf-8")), path
