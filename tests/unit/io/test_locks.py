"""Locks and the cleanup they make safe (`io.locks`): the temp file of a writer killed mid-write
is removed, that of a live writer (its lock held) stays; the token and embedding caches clean
up after their killed writers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from conftest import ROOT
from support.fakes import CountingEncoder

from retrieval_bench.encoders.cache import EmbeddingCache, cache_key
from retrieval_bench.io.locks import lock_path_for, remove_stale_temps
from retrieval_bench.text.token_cache import token_cache_key, tokenize_corpus

SRC = str(ROOT / "src")


def _killed_mid_write(target: Path) -> None:
    """A writer that holds the entry's lock and is killed (SIGKILL) halfway through a write."""
    code = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from retrieval_bench.io.atomic import atomic_writer
        from retrieval_bench.io.locks import file_lock, lock_path_for
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
            "import sys; from pathlib import Path; from retrieval_bench.io.locks import file_lock\n"
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
