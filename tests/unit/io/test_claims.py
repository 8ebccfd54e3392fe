"""A folder per job, claimed rather than named (`io.claims`): two jobs started in the same second
never share one, a config claims its folder once, and claims nothing was written into are
released."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from omegaconf import OmegaConf

from retrieval_bench.io.claims import claim_new_dir, release_unused_claims


def test_claim_new_dir_never_hands_out_a_taken_folder(tmp_path: Path) -> None:
    base = str(tmp_path / "runs" / "12-00-00-bm25")
    first = claim_new_dir(base)
    second = claim_new_dir(base)
    third = claim_new_dir(base)
    assert (first, second, third) == (base, f"{base}-2", f"{base}-3")
    assert all(Path(p).is_dir() for p in (first, second, third))


def test_unused_claims_are_released_and_used_ones_kept(tmp_path: Path) -> None:
    # Hydra resolves an overridden run dir while merging (experiment=monthly): that claim
    # stays empty and must not leave outputs/runs/<day>/ behind; a folder holding files stays.
    release_unused_claims()  # claims of earlier tests
    unused = claim_new_dir(str(tmp_path / "outputs" / "runs" / "day" / "12-00-00-hybrid"))
    assert Path(unused).is_dir()
    used = claim_new_dir(str(tmp_path / "kept" / "12-00-00-bm25"))
    (Path(used) / "metrics.json").write_text("{}")
    release_unused_claims()
    assert not (tmp_path / "outputs").exists()
    assert sorted(p.name for p in Path(used).iterdir()) == ["metrics.json"]


def test_the_default_job_folders_are_claimed_not_just_named() -> None:
    hydra = yaml.safe_load((ROOT / "conf" / "config.yaml").read_text())["hydra"]
    assert hydra["run"]["dir"].startswith("${new_dir:outputs/runs/")
    assert hydra["sweep"]["dir"].startswith("${new_dir:outputs/multirun/")


@pytest.fixture
def new_dir_resolver() -> Iterator[None]:
    OmegaConf.register_new_resolver("new_dir", claim_new_dir, use_cache=True, replace=True)
    yield
    OmegaConf.clear_resolver("new_dir")


def test_a_config_claims_its_folder_once(tmp_path: Path, new_dir_resolver: None) -> None:
    """Hydra resolves the job folder several times, and copies the resolver cache into each
    sweep job's config (OmegaConf.copy_cache): every read must give the folder first claimed."""
    cfg = OmegaConf.create({"dir": "${new_dir:" + str(tmp_path / "job") + "}"})
    claimed = cfg.dir
    assert cfg.dir == claimed == str(tmp_path / "job")
    job_cfg = OmegaConf.create({"dir": "${new_dir:" + str(tmp_path / "job") + "}"})
    OmegaConf.copy_cache(from_config=cfg, to_config=job_cfg)
    assert job_cfg.dir == claimed
    other = OmegaConf.create({"dir": "${new_dir:" + str(tmp_path / "job") + "}"})
    assert other.dir == str(tmp_path / "job-2")  # another process's config: another folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job", "job-2"]
