"""Files and folders: a folder per job, umask-respecting writes, stale cache temp files,
an unusable cache_dir (issue 9, items 1 and 9)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import FIXTURE, ROOT
from omegaconf import OmegaConf
from support.fakes import CountingEncoder

from retrieval_bench.config import RunConfig
from retrieval_bench.encoders.cache import EmbeddingCache, cache_key
from retrieval_bench.errors import ConfigError
from retrieval_bench.io import (
    atomic_write_text,
    claim_new_dir,
    lock_path_for,
    release_unused_claims,
    remove_stale_temps,
    stored_or_built,
    writable_dir,
)
from retrieval_bench.job.runner import run_job
from retrieval_bench.text.token_cache import token_cache_key, tokenize_corpus

SRC = str(ROOT / "src")


# -- item 1: a new folder per job -------------------------------------------------------------
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


# -- item 9: the umask decides ----------------------------------------------------------------
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_written_files_get_the_mode_the_umask_gives(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "sub" / "report.md", "x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "sub" / "report.md").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "sub").stat().st_mode) == 0o777 & ~umask


# -- item 9: temp files of killed writers -----------------------------------------------------
def _killed_mid_write(target: Path) -> None:
    """A writer that holds the entry's lock and is killed (SIGKILL) halfway through a write."""
    code = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from retrieval_bench.io import atomic_writer, file_lock, lock_path_for
        target = Path({str(target)!r})
        target.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(lock_path_for(target)), atomic_writer(target) as fh:
            fh.write(b"half")
            fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC})
    assert proc.returncode == -signal.SIGKILL


def _temps(root: Path) -> list[Path]:
    return sorted(root.rglob(".*.tmp"))


def test_temp_files_of_killed_writers_go_those_of_live_writers_stay(tmp_path: Path) -> None:
    dead = tmp_path / "ab" / "abc.npy"
    live = tmp_path / "cd" / "cde.npy"
    _killed_mid_write(dead)
    _killed_mid_write(live)
    [dead_tmp] = [p for p in _temps(tmp_path) if p.parent == dead.parent]
    assert dead_tmp.name.startswith(".abc.npy.")
    # A live writer holds the other entry's lock while it writes.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from retrieval_bench.io import file_lock\n"
            f"with file_lock(Path({str(lock_path_for(live))!r})):\n"
            "    print('locked', flush=True); sys.stdin.read()",
        ],
        env={**os.environ, "PYTHONPATH": SRC},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        removed = remove_stale_temps(tmp_path)
    finally:
        holder.communicate("")
    assert removed == [dead_tmp]
    [live_tmp] = _temps(tmp_path)
    assert live_tmp.parent == live.parent
    assert remove_stale_temps(tmp_path) == [live_tmp]  # its lock is free now
    assert _temps(tmp_path) == []


def test_the_token_cache_cleans_up_after_a_killed_writer(tmp_path: Path) -> None:
    texts, identity = ["a b", "b c"], {"tokenizer": "split"}
    key = token_cache_key(identity, texts)
    _killed_mid_write(tmp_path / key[:2] / f"{key}.npz")
    assert len(_temps(tmp_path)) == 1
    corpus = tokenize_corpus(texts, str.split, identity, tmp_path)
    assert corpus.token_lists() == [["a", "b"], ["b", "c"]]
    assert _temps(tmp_path) == []


def test_the_embedding_cache_cleans_up_after_a_killed_writer(tmp_path: Path) -> None:
    encoder, texts = CountingEncoder(), ["北京", "上海"]
    npy, _, _ = EmbeddingCache(tmp_path).paths(cache_key(encoder.identity(), "passages", texts))
    _killed_mid_write(npy)
    other = tmp_path / "ff" / "ffff.npy"  # another key, whose writer was killed too
    _killed_mid_write(other)
    assert len(_temps(tmp_path)) == 2
    vectors, stats = EmbeddingCache(tmp_path).encode(encoder, texts, "passages")
    assert stats.encoded == 2 and vectors.shape == (2, encoder.dim)
    assert np.array_equal(np.load(npy), vectors)
    assert _temps(tmp_path) == []


# -- item 9: an unusable cache_dir ------------------------------------------------------------
def test_an_uncreatable_cache_dir_names_cache_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError) as info:
        writable_dir(blocker / "cache", "cache_dir")
    assert str(info.value) == (
        f"config key 'cache_dir': {blocker / 'cache'}: cannot write there (Not a directory)"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_dir_names_cache_dir(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "tokens").mkdir(parents=True)
    (cache / "tokens").chmod(0o555)
    try:
        with pytest.raises(ConfigError, match=r"'cache_dir': .*tokens: cannot write there"):
            writable_dir(cache, "cache_dir", ["tokens", "embeddings"])
    finally:
        (cache / "tokens").chmod(0o755)


def test_run_job_refuses_the_cache_dir_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cfg = RunConfig(cache_dir=str(blocker / "cache"))
    cfg.dataset.corpus = str(tmp_path / "no-such-corpus")  # never read: the check comes first
    cfg.dataset.evalset = str(FIXTURE / "evalsets" / "mini.jsonl")
    with pytest.raises(ConfigError, match=r"^config key 'cache_dir': "):
        run_job(cfg)


def test_stored_or_built_builds_once_then_reads_and_replaces_what_does_not_unpickle(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache" / "value.pickle"
    builds: list[int] = []

    def build() -> dict[str, int]:
        builds.append(1)
        return {"a": 1, "b": 2}

    def accept(value: object) -> bool:
        return isinstance(value, dict)

    assert stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert len(builds) == 1, "the second call read the stored value"
    path.write_bytes(b"half a pickle")
    assert stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert len(builds) == 2 and stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert len(builds) == 2, "the unreadable file was replaced"
    assert stored_or_built(path, lambda: [1], lambda v: isinstance(v, list)) == [1]  # refused
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    assert stored_or_built(blocked / "value.pickle", build, accept) == {"a": 1, "b": 2}


def test_jiebas_dictionary_from_the_store_is_the_one_jieba_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_bench.text.tokenizer import base_dictionary

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = base_dictionary.__wrapped__()  # jieba's own initialize, then stored
    assert list((tmp_path / "retrieval-bench" / "jieba-dictionary").glob("*.pickle"))
    stored = base_dictionary.__wrapped__()  # read back
    assert stored == built
    assert stored[0]["北京"] > 0 and stored[1] > 0
